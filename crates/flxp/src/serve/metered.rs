//! [`MeteredTransport`]: a [`Transport`] layer that times every call, counts failures by endpoint
//! template, and records when the zone last answered and last could not be reached (what
//! `/readyz` and `zones { reachable }` read). It decides nothing and changes no call.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use flxp_pve::{ApiErrorKind, Error, Request, Result, Transport};
use tokio::time::{Duration, Instant};

use super::metrics::{Endpoint, EndpointError, Metrics};

/// When a zone last answered and last could not be reached, as its metered transport saw it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Contact {
    /// The last call Proxmox answered (even with an error answer: the zone is reachable).
    pub last_answer: Option<Instant>,
    /// The last call that reached no one (refused, TLS, timeout, broken connection) or whose
    /// credentials Proxmox refused (401).
    pub last_failure: Option<Instant>,
    /// Whether the newest outcome is such a failure: a zone that refused a connection a moment
    /// ago is not reachable, however recent its last answer.
    failing: bool,
}

impl Contact {
    /// Whether Proxmox answered within `window` and has not failed to answer since.
    pub fn reachable_within(&self, window: Duration) -> bool {
        !self.failing && self.last_answer.is_some_and(|t| t.elapsed() <= window)
    }
}

/// A zone's [`Contact`] clock, shared by its transport and its readers.
pub type SharedContact = Arc<Mutex<Contact>>;

/// A zone's transport with metrics and a [`Contact`] clock.
pub struct MeteredTransport {
    inner: Arc<dyn Transport>,
    zone: String,
    metrics: Arc<Metrics>,
    contact: SharedContact,
}

impl MeteredTransport {
    /// Wraps `inner` for `zone`; `contact` records every answer and every failure to reach it.
    pub fn new(
        inner: Arc<dyn Transport>,
        zone: &str,
        metrics: Arc<Metrics>,
        contact: SharedContact,
    ) -> Self {
        Self {
            inner,
            zone: zone.to_owned(),
            metrics,
            contact,
        }
    }

    fn observe(&self, endpoint: &str, start: Instant, error: Option<&Error>) {
        let seconds = start.elapsed().as_secs_f64();
        self.metrics
            .api_seconds
            .get_or_create(&Endpoint {
                zone: self.zone.clone(),
                endpoint: endpoint.to_owned(),
            })
            .observe(seconds);
        let answered = match error {
            None => Some(true),
            Some(e) => {
                self.metrics
                    .api_errors
                    .get_or_create(&EndpointError {
                        zone: self.zone.clone(),
                        endpoint: endpoint.to_owned(),
                        kind: error_kind(e).to_owned(),
                    })
                    .inc();
                match e {
                    // Refused credentials: Proxmox answers, but flxp can do nothing there.
                    Error::Api {
                        kind: ApiErrorKind::AuthFailed,
                        ..
                    } => Some(false),
                    Error::Api { .. } | Error::TaskFailed { .. } => Some(true),
                    Error::Connect { .. }
                    | Error::Tls { .. }
                    | Error::Timeout { .. }
                    | Error::Transport { .. } => Some(false),
                    // A garbled answer or a client-side error says nothing either way.
                    _ => None,
                }
            }
        };
        let Some(answered) = answered else {
            return;
        };
        let mut c = self.contact.lock().unwrap_or_else(|p| p.into_inner());
        if answered {
            c.last_answer = Some(Instant::now());
        } else {
            c.last_failure = Some(Instant::now());
        }
        c.failing = !answered;
    }
}

/// A bounded label for an error.
fn error_kind(e: &Error) -> &'static str {
    match e {
        Error::Api { kind, .. } => match kind {
            ApiErrorKind::Locked { .. } => "locked",
            ApiErrorKind::ChecksumMismatch => "checksum_mismatch",
            ApiErrorKind::AlreadyExists => "already_exists",
            ApiErrorKind::AuthFailed => "auth_failed",
            ApiErrorKind::PermissionDenied => "permission_denied",
            ApiErrorKind::NotFound => "not_found",
            ApiErrorKind::InvalidParameters => "invalid_parameters",
            ApiErrorKind::NotImplemented => "not_implemented",
            ApiErrorKind::ProxyUnreachable => "proxy_unreachable",
            ApiErrorKind::Server => "server",
            _ => "other",
        },
        Error::Connect { .. } => "connect",
        Error::Tls { .. } => "tls",
        Error::Timeout { .. } => "timeout",
        Error::Transport { .. } => "transport",
        Error::BadResponse { .. } => "bad_response",
        Error::TaskFailed { .. } => "task_failed",
        Error::TaskTimeout { .. } => "task_timeout",
        _ => "other",
    }
}

#[async_trait]
impl Transport for MeteredTransport {
    async fn send(&self, request: Request) -> Result<flxp_pve::Data> {
        let endpoint = request.endpoint;
        let start = Instant::now();
        let r = self.inner.send(request).await;
        self.observe(endpoint, start, r.as_ref().err());
        r
    }

    fn server_time(&self) -> Option<i64> {
        self.inner.server_time()
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic on malformed fixtures: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use flxp_pve::Pve;

    use super::*;
    use crate::serve::embedded::{self, Embedded};

    /// The simulator of the embedded zone, answering `GET path` with Proxmox's error `status`
    /// and `message` when given, and the transport of a client of it.
    async fn simulated(fail: Option<(&str, u16, &str)>) -> (Embedded, Arc<dyn Transport>) {
        let sim = embedded::start().await.unwrap();
        if let Some((path, status, message)) = fail {
            sim.fail_get(path, status, message);
        }
        let transport = Arc::clone(sim.client().transport()) as Arc<dyn Transport>;
        (sim, transport)
    }

    #[tokio::test]
    async fn calls_are_timed_per_endpoint_template_and_errors_counted_by_kind() {
        let (_sim, transport) =
            simulated(Some(("/nodes/pve1/status", 403, "Permission check failed"))).await;
        let metrics = Arc::new(Metrics::new());
        let last = SharedContact::default();
        let api = Pve::from_transport(MeteredTransport::new(
            transport,
            "lab",
            Arc::clone(&metrics),
            Arc::clone(&last),
        ));
        api.cluster_tasks().await.unwrap();
        api.node_status("pve1").await.unwrap_err();
        let text = metrics.render();
        let count = |endpoint: &str| {
            format!(
                "flxp_proxmox_request_duration_seconds_count{{zone=\"lab\",endpoint=\"{endpoint}\"}} 1"
            )
        };
        assert!(text.contains(&count("GET /cluster/tasks")), "{text}");
        assert!(text.contains(&count("GET /nodes/{node}/status")), "{text}");
        assert!(
            text.contains(
                "flxp_proxmox_errors_total{zone=\"lab\",endpoint=\"GET /nodes/{node}/status\",kind=\"permission_denied\"} 1"
            ),
            "{text}"
        );
        assert!(
            last.lock().unwrap().last_answer.is_some(),
            "an error answer is an answer"
        );
    }

    /// A zone whose token Proxmox refuses answers every call with 401: not ready, since flxp
    /// can read and do nothing there.
    #[tokio::test]
    async fn refused_credentials_make_the_zone_unreachable() {
        let (_sim, transport) =
            simulated(Some(("/cluster/tasks", 401, "authentication failure"))).await;
        let contact = SharedContact::default();
        let api = Pve::from_transport(MeteredTransport::new(
            transport,
            "lab",
            Arc::new(Metrics::new()),
            Arc::clone(&contact),
        ));
        api.cluster_tasks().await.unwrap_err();
        let c = *contact.lock().unwrap();
        assert!(c.last_failure.is_some());
        assert!(!c.reachable_within(Duration::from_secs(60)));
    }

    /// Answers until `refuse` is set, then refuses every connection.
    struct Flaky {
        inner: Arc<dyn Transport>,
        refuse: std::sync::atomic::AtomicBool,
    }

    #[async_trait]
    impl Transport for Flaky {
        async fn send(&self, request: Request) -> Result<flxp_pve::Data> {
            if self.refuse.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(Error::Connect {
                    host: "pve1:8006".into(),
                    message: "Connection refused".into(),
                });
            }
            self.inner.send(request).await
        }
        fn server_time(&self) -> Option<i64> {
            None
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_refused_connection_makes_the_zone_unreachable_until_it_answers_again() {
        let (_sim, inner) = simulated(None).await;
        let flaky = Arc::new(Flaky {
            inner,
            refuse: false.into(),
        });
        let contact = SharedContact::default();
        let api = Pve::from_transport(MeteredTransport::new(
            Arc::clone(&flaky) as Arc<dyn Transport>,
            "lab",
            Arc::new(Metrics::new()),
            Arc::clone(&contact),
        ));
        let window = Duration::from_secs(60);
        let reachable = || contact.lock().unwrap().reachable_within(window);
        assert!(!reachable(), "never answered yet");
        api.cluster_tasks().await.unwrap();
        assert!(reachable());
        flaky
            .refuse
            .store(true, std::sync::atomic::Ordering::SeqCst);
        api.cluster_tasks().await.unwrap_err();
        assert!(!reachable(), "the newest outcome is a refused connection");
        assert!(contact.lock().unwrap().last_failure.is_some());
        flaky
            .refuse
            .store(false, std::sync::atomic::Ordering::SeqCst);
        api.cluster_tasks().await.unwrap();
        assert!(reachable(), "answering again makes it reachable");
        tokio::time::advance(window + Duration::from_secs(1)).await;
        assert!(!reachable(), "an answer older than the window is stale");
    }
}
