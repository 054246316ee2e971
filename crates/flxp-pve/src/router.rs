//! [`Router`]: `METHOD /path/{pattern}` → handler, for transports that answer in memory (test
//! doubles, the fake). A call no route matches is a 501 naming it, so a double implements only
//! what it answers and a test fails fast on anything else.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::endpoint;
use crate::error::{Error, Result, api_error};
use crate::request::{Endpoint, Method, Request, unseg};
use crate::transport::Data;

/// A handler: the double's state, the request, and the path's `{name}` captures.
pub type Handler<S> = fn(&S, &Request, &Captures) -> Result<Data>;

/// The `{name}` segments of a matched path, percent-decoded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captures(BTreeMap<&'static str, String>);

impl Captures {
    /// The segment captured as `{name}` (empty if the pattern has none).
    pub fn get(&self, name: &str) -> &str {
        self.0.get(name).map_or("", String::as_str)
    }

    /// The segment captured as `{name}`, as a number (a 400 if it is not one).
    pub fn u32(&self, name: &str, request: &Request) -> Result<u32> {
        self.get(name).parse().map_err(|_| {
            api_error(
                request.method.as_str(),
                &request.path,
                400,
                &format!("{name} is not a number"),
                b"",
            )
        })
    }
}

/// Routes requests to handlers by method and path pattern; the first route that matches wins.
pub struct Router<S> {
    routes: Vec<(Method, Vec<&'static str>, Handler<S>)>,
}

impl<S> Default for Router<S> {
    fn default() -> Self {
        Self { routes: Vec::new() }
    }
}

impl<S> std::fmt::Debug for Router<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(
                self.routes
                    .iter()
                    .map(|(m, p, _)| format!("{m} /{}", p.join("/"))),
            )
            .finish()
    }
}

impl<S> Router<S> {
    /// A router with no routes.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a route: `endpoint!(GET "/nodes/{node}/status")` (`{name}` matches one segment).
    pub fn route(mut self, endpoint: Endpoint, handler: Handler<S>) -> Self {
        let pattern = endpoint
            .template()
            .trim_start_matches('/')
            .split('/')
            .collect();
        self.routes.push((endpoint.method(), pattern, handler));
        self
    }

    /// Answers `request` with the first matching route, else a 501 "not routed: METHOD /path".
    pub fn handle(&self, state: &S, request: &Request) -> Result<Data> {
        let segments: Vec<&str> = request.path.trim_start_matches('/').split('/').collect();
        for (method, pattern, handler) in &self.routes {
            if *method != request.method || pattern.len() != segments.len() {
                continue;
            }
            let mut captures = Captures::default();
            let matched = pattern.iter().zip(&segments).all(|(p, s)| {
                match p.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
                    Some(name) => {
                        captures.0.insert(name, unseg(s));
                        true
                    }
                    None => p == s,
                }
            });
            if matched {
                return handler(state, request, &captures);
            }
        }
        Err(not_routed(request))
    }
}

/// The reads of a scheduling round that every in-memory double answers: the cluster's resources,
/// options, tasks and HA state, a node's config, rrd data and storage, a task's status and log.
pub trait RoundReads {
    /// `GET /cluster/resources`
    fn cluster_resources(&self, request: &Request, c: &Captures) -> Result<Data>;
    /// `GET /cluster/options`
    fn cluster_options(&self, request: &Request, c: &Captures) -> Result<Data>;
    /// `GET /cluster/tasks`
    fn cluster_tasks(&self, request: &Request, c: &Captures) -> Result<Data>;
    /// `GET /cluster/ha/resources`
    fn ha_resources(&self, request: &Request, c: &Captures) -> Result<Data>;
    /// `GET /cluster/ha/rules`
    fn ha_rules(&self, request: &Request, c: &Captures) -> Result<Data>;
    /// `GET /cluster/ha/status/current`
    fn ha_status(&self, request: &Request, c: &Captures) -> Result<Data>;
    /// `GET /nodes/{node}/config`
    fn node_config(&self, request: &Request, c: &Captures) -> Result<Data>;
    /// `GET /nodes/{node}/rrddata`
    fn node_rrddata(&self, request: &Request, c: &Captures) -> Result<Data>;
    /// `GET /nodes/{node}/storage`
    fn node_storage(&self, request: &Request, c: &Captures) -> Result<Data>;
    /// `GET /nodes/{node}/tasks/{upid}/status`
    fn task_status(&self, request: &Request, c: &Captures) -> Result<Data>;
    /// `GET /nodes/{node}/tasks/{upid}/log`
    fn task_log(&self, request: &Request, c: &Captures) -> Result<Data>;
}

impl<S: RoundReads> Router<S> {
    /// Adds the [`RoundReads`] routes. Their paths overlap no other double's routes except a
    /// catch-all like `/nodes/{node}/{kind}`, which must come after them.
    pub fn round_reads(self) -> Self {
        self.route(endpoint!(GET "/cluster/resources"), S::cluster_resources)
            .route(endpoint!(GET "/cluster/options"), S::cluster_options)
            .route(endpoint!(GET "/cluster/tasks"), S::cluster_tasks)
            .route(endpoint!(GET "/cluster/ha/resources"), S::ha_resources)
            .route(endpoint!(GET "/cluster/ha/rules"), S::ha_rules)
            .route(endpoint!(GET "/cluster/ha/status/current"), S::ha_status)
            .route(endpoint!(GET "/nodes/{node}/config"), S::node_config)
            .route(endpoint!(GET "/nodes/{node}/rrddata"), S::node_rrddata)
            .route(endpoint!(GET "/nodes/{node}/storage"), S::node_storage)
            .route(
                endpoint!(GET "/nodes/{node}/tasks/{upid}/status"),
                S::task_status,
            )
            .route(endpoint!(GET "/nodes/{node}/tasks/{upid}/log"), S::task_log)
    }
}

/// The 501 of a call no route answers.
pub fn not_routed(request: &Request) -> Error {
    api_error(
        request.method.as_str(),
        &request.path,
        501,
        &format!("not routed: {request}"),
        b"",
    )
}

/// A handler's answer: any serializable value as the `data` of the reply, serialized once to
/// JSON text (as Proxmox would send it) for the typed endpoints to decode.
pub fn reply<T: Serialize>(value: T) -> Result<Data> {
    serde_json::value::to_raw_value(&value).map_err(|e| Error::Request {
        endpoint: "reply".into(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    // Tests may panic on malformed fixtures: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn status(_: &(), _: &Request, c: &Captures) -> Result<Data> {
        reply(format!("status of {}", c.get("node")))
    }

    fn config(_: &(), _: &Request, _: &Captures) -> Result<Data> {
        reply("config")
    }

    #[test]
    fn routes_match_method_and_pattern_and_capture_segments() {
        let router = Router::new()
            .route(endpoint!(GET "/nodes/{node}/config"), config)
            .route(endpoint!(GET "/nodes/{node}/{what}"), status);
        let get = |path: &str| Request::new(endpoint!(GET "/x"), path.into());
        assert_eq!(
            router
                .handle(&(), &get("/nodes/pve%201/status"))
                .unwrap()
                .get(),
            r#""status of pve 1""#
        );
        assert_eq!(
            router
                .handle(&(), &get("/nodes/pve1/config"))
                .unwrap()
                .get(),
            r#""config""#
        );
        let put = Request::new(
            endpoint!(PUT "/nodes/{node}/config"),
            "/nodes/pve1/config".into(),
        );
        let e = router.handle(&(), &put).unwrap_err();
        assert_eq!(e.status(), Some(501));
        assert!(
            e.to_string().contains("not routed: PUT /nodes/pve1/config"),
            "{e}"
        );
    }
}
