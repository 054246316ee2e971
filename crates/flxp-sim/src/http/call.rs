//! [`Call`]: one API request as a handler sees it: who asks, and the parameters, decoded as
//! Proxmox decodes them and verified against the endpoint's schema (400 with per-parameter
//! errors otherwise), with the `proxyto` node reachable and write permission checked.

use axum::extract::{FromRequest, FromRequestParts, MatchedPath, RawPathParams, Request};
use axum::http::header;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::gate::API_PREFIX;
use super::params::{MAX_BODY, Params, collect};
use crate::auth::Principal;
use crate::schema::{ApiSchema, scalar_text};
use crate::{ApiError, Sim};

/// A verified API request.
#[derive(Debug, Clone)]
pub struct Call {
    /// The caller.
    pub principal: Principal,
    /// The parameters (query, body and path).
    pub params: Params,
    /// `GET /nodes/{node}/...`: the schema key of the endpoint.
    pub endpoint: String,
}

impl Call {
    /// The parameters read into a typed wire struct (every scalar as text, read leniently).
    pub fn typed<T: DeserializeOwned>(&self) -> Result<T, ApiError> {
        let text: Map<String, Value> = self
            .params
            .0
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    Value::Array(items) => Value::Array(
                        items
                            .iter()
                            .map(|i| Value::String(scalar_text(i)))
                            .collect(),
                    ),
                    other => Value::String(scalar_text(other)),
                };
                (k.clone(), v)
            })
            .collect();
        serde_json::from_value(Value::Object(text))
            .map_err(|e| ApiError::new(400, format!("Parameter verification failed.\n{e}")))
    }

    /// Who the task user is (`user@realm` or `user@realm!token`).
    pub fn user(&self) -> String {
        self.principal.task_user()
    }
}

impl FromRequest<Sim> for Call {
    type Rejection = ApiError;

    async fn from_request(req: Request, sim: &Sim) -> Result<Self, Self::Rejection> {
        let (mut parts, body) = req.into_parts();
        let method = parts.method.as_str().to_string();
        let matched = parts
            .extensions
            .get::<MatchedPath>()
            .map(|m| m.as_str().to_string())
            .unwrap_or_default();
        let template = matched
            .strip_prefix(API_PREFIX)
            .unwrap_or(&matched)
            .to_string();
        let path_params = RawPathParams::from_request_parts(&mut parts, sim)
            .await
            .ok();
        let principal = parts
            .extensions
            .get::<Principal>()
            .cloned()
            .unwrap_or(Principal {
                userid: String::new(),
                tokenid: None,
                readonly: true,
                by_ticket: false,
                privs: None,
            });
        let content_type = parts
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let bytes = axum::body::to_bytes(body, MAX_BODY)
            .await
            .map_err(|_| ApiError::new(501, "request entity too large"))?;
        let mut params = collect(parts.uri.query(), content_type.as_deref(), &bytes)?;
        if let Some(pp) = path_params {
            for (k, v) in pp.iter() {
                params.insert(k.to_string(), Value::String(v.to_string()));
            }
        }
        let endpoint = format!("{method} {template}");
        let schema = ApiSchema::embedded();
        let entry = schema.endpoint(&endpoint);
        if let Some(entry) = entry {
            wrap_arrays(entry, &mut params);
            let errors = schema.check_params(entry, &params);
            if !errors.is_empty() {
                return Err(ApiError::params(errors));
            }
        }
        let params = Params(params);
        if let Some(entry) = entry {
            if entry.get("proxyto").and_then(Value::as_str) == Some("node") {
                if let Some(node) = params.text("node") {
                    let w = sim.world();
                    let n = w.node(&node)?;
                    if !n.online {
                        return Err(ApiError::new(
                            595,
                            format!("No route to host (node '{node}' is offline)"),
                        ));
                    }
                }
            }
            if let Some(privs) = &principal.privs {
                super::privs::check(&endpoint, entry, &params, privs)?;
            } else if principal.readonly && method != "GET" {
                if let Some((path, privilege)) = permission_check(entry, &params) {
                    return Err(ApiError::permission(&path, &privilege));
                }
            }
        }
        Ok(Call {
            principal,
            params,
            endpoint,
        })
    }
}

/// A single value given for an array parameter (`vms=100`) is a one-element array, as the
/// form decoder only makes arrays of repeated keys.
fn wrap_arrays(entry: &Value, params: &mut Map<String, Value>) {
    let Some(props) = entry
        .get("parameters")
        .and_then(|p| p.get("properties"))
        .and_then(Value::as_object)
    else {
        return;
    };
    for (k, v) in params.iter_mut() {
        let is_array = props
            .get(k)
            .and_then(|s| s.get("type"))
            .and_then(Value::as_str)
            == Some("array");
        if is_array && !v.is_array() {
            *v = Value::Array(vec![v.take()]);
        }
    }
}

/// The `["perm", "/vms/{vmid}", ["VM.Migrate"]]` check of an endpoint, with the path filled in.
fn permission_check(entry: &Value, params: &Params) -> Option<(String, String)> {
    let check = entry.get("permissions")?.get("check")?.as_array()?;
    if check.first()?.as_str()? != "perm" {
        return Some(("/".into(), "Sys.Modify".into()));
    }
    let mut path = check.get(1)?.as_str()?.to_string();
    for (k, v) in &params.0 {
        path = path.replace(&format!("{{{k}}}"), &scalar_text(v));
    }
    let privilege = check.get(2)?.as_array()?.first()?.as_str()?.to_string();
    Some((path, privilege))
}
