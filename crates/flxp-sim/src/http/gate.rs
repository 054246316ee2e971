//! The gate every request passes before its handler: latency (configured and injected),
//! authentication (token, ticket, CSRF on writes), and injected error answers.

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::auth::AuthOutcome;
use crate::{ApiError, Sim};

/// The API prefix every Proxmox path lives under.
pub const API_PREFIX: &str = "/api2/json";

/// Paths that need no credentials.
fn is_public(api_path: &str) -> bool {
    api_path == "/access/ticket"
}

/// Counts every routed request in the records (method, route template, principal), whatever
/// its handler: the week benchmark's API-call figures read them. A route layer, so that the
/// matched template is known and the gate has already named the principal.
pub async fn count(State(sim): State<Sim>, req: Request, next: Next) -> Response {
    let matched = req
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map(|m| m.as_str().to_string())
        .unwrap_or_default();
    let template = matched.strip_prefix(API_PREFIX).unwrap_or(&matched);
    let user = req
        .extensions()
        .get::<crate::auth::Principal>()
        .map(|p| p.task_user())
        .unwrap_or_default();
    {
        let mut w = sim.world();
        let now = w.now;
        w.records_mut()
            .request(req.method().as_str(), template, &user, now);
    }
    next.run(req).await
}

/// Latency, authentication and faults, in that order; every answer is dated by the simulated
/// clock, as Proxmox's are by the cluster's, so clients compare task times with the same clock.
pub async fn gate(State(sim): State<Sim>, req: Request, next: Next) -> Response {
    let mut response = checked(&sim, req, next).await;
    let now = std::time::Duration::try_from_secs_f64(sim.now())
        .ok()
        .and_then(|d| std::time::UNIX_EPOCH.checked_add(d));
    if let Some(v) =
        now.and_then(|t| axum::http::HeaderValue::from_str(&httpdate::fmt_http_date(t)).ok())
    {
        response.headers_mut().insert(axum::http::header::DATE, v);
    }
    response
}

async fn checked(sim: &Sim, mut req: Request, next: Next) -> Response {
    let method = req.method().as_str().to_string();
    let path = req.uri().path().to_string();
    let api_path = path.strip_prefix(API_PREFIX).map(str::to_string);
    let fault_path = api_path.clone().unwrap_or_else(|| path.clone());

    let extra = sim.world().faults.latency_ms(&method, &fault_path);
    let delay = sim.latency() + std::time::Duration::from_millis(extra);
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }

    if !api_path.as_deref().is_some_and(is_public) {
        match sim.auth().check(req.headers()) {
            AuthOutcome::Ok(principal) => {
                if principal.by_ticket && req.method() != axum::http::Method::GET {
                    let csrf = req
                        .headers()
                        .get("CSRFPreventionToken")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default();
                    if !sim.auth().verify_csrf(&principal.userid, csrf) {
                        return ApiError::bad_csrf().into_response();
                    }
                }
                // The control endpoint changes the world: read-only principals may only look.
                if principal.readonly
                    && api_path.is_none()
                    && req.method() != axum::http::Method::GET
                {
                    return ApiError::new(403, "Permission check failed (read-only user)")
                        .into_response();
                }
                req.extensions_mut().insert(principal);
            }
            AuthOutcome::Missing => {
                tokio::time::sleep(sim.auth_delay()).await;
                return ApiError::no_ticket().into_response();
            }
            AuthOutcome::Failed => {
                tracing::debug!(%path, "authentication failed");
                tokio::time::sleep(sim.auth_delay()).await;
                return ApiError::auth_failed().into_response();
            }
        }
    }

    if let Some(err) = sim.world().faults_mut().error_for(&method, &fault_path) {
        tracing::debug!(%method, %path, status = err.status, "injected fault");
        return err.into_response();
    }
    let response = next.run(req).await;
    tracing::trace!(%method, %path, status = response.status().as_u16(), "request");
    response
}
