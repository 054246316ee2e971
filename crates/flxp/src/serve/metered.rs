//! [`MeteredTransport`]: a [`Transport`] layer that times every call, counts failures by endpoint
//! template, and records when the zone last answered (what `/readyz` reads). It decides nothing
//! and changes no call.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use flxp_pve::{ApiErrorKind, Error, Request, Result, Transport};
use tokio::time::Instant;

use super::metrics::{Endpoint, EndpointError, Metrics};

/// A zone's transport with metrics and a "last answered" clock.
pub struct MeteredTransport {
    inner: Arc<dyn Transport>,
    zone: String,
    metrics: Arc<Metrics>,
    last_answer: Arc<Mutex<Option<Instant>>>,
}

impl MeteredTransport {
    /// Wraps `inner` for `zone`; `last_answer` is set whenever Proxmox answers (even with an
    /// error answer: the zone is reachable).
    pub fn new(
        inner: Arc<dyn Transport>,
        zone: &str,
        metrics: Arc<Metrics>,
        last_answer: Arc<Mutex<Option<Instant>>>,
    ) -> Self {
        Self {
            inner,
            zone: zone.to_owned(),
            metrics,
            last_answer,
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
            None => true,
            Some(e) => {
                self.metrics
                    .api_errors
                    .get_or_create(&EndpointError {
                        zone: self.zone.clone(),
                        endpoint: endpoint.to_owned(),
                        kind: error_kind(e).to_owned(),
                    })
                    .inc();
                matches!(e, Error::Api { .. } | Error::TaskFailed { .. })
            }
        };
        if answered {
            *self.last_answer.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        }
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
    async fn send(&self, request: Request) -> Result<serde_json::Value> {
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

    use flxp_core::Snapshot;
    use flxp_pve::Pve;
    use flxp_pve::fake::FakeApi;

    use super::*;

    #[tokio::test]
    async fn calls_are_timed_per_endpoint_template_and_errors_counted_by_kind() {
        let fake = FakeApi::new(Snapshot::default()).fail(
            "GET /nodes/pve1/status",
            403,
            "Permission check failed",
        );
        let metrics = Arc::new(Metrics::new());
        let last = Arc::new(Mutex::new(None));
        let api = Pve::from_transport(MeteredTransport::new(
            Arc::clone(fake.transport()) as Arc<dyn Transport>,
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
            last.lock().unwrap().is_some(),
            "an error answer is an answer"
        );
    }
}
