//! The HTTP side: [`router`] (separate from binding, so tests drive it with `oneshot`), bearer
//! token auth on the API, the dashboard and GraphiQL pages, `/metrics`, `/healthz` and `/readyz`.
//!
//! | route | auth | what |
//! |---|---|---|
//! | `GET /` | none | the dashboard (a static page; its requests carry the token) |
//! | `GET /assets/...` | none | the dashboard's and GraphiQL's embedded files |
//! | `POST /graphql` | bearer token | the API |
//! | `GET /graphql` | none | GraphiQL (a static page; its requests carry the token) |
//! | `GET /events` | bearer token | live progress of runs, as server-sent events |
//! | `GET /metrics` | none | Prometheus text format |
//! | `GET /healthz` | none | 200 while the process serves |
//! | `GET /readyz` | none | 200 when every zone answered recently, else 503 |

use async_graphql::ServerError;
use async_graphql::http::MultipartOptions;
use async_graphql_axum::GraphQLResponse;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;

use super::dashboard;
use super::schema::{Code, FlxpSchema};
use super::state::{AppState, Caller, Role};

/// What the handlers share.
#[derive(Clone)]
pub struct HttpState {
    /// The service state.
    pub app: AppState,
    /// The GraphQL schema.
    pub schema: FlxpSchema,
}

/// The service's routes.
pub fn router(app: AppState) -> Router {
    let schema = super::schema::build(app.clone());
    let state = HttpState { app, schema };
    let api = axum::routing::post(graphql)
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token));
    let events =
        get(events).route_layer(middleware::from_fn_with_state(state.clone(), require_token));
    Router::new()
        .route("/", get(dashboard::index))
        .route("/assets/{*path}", get(dashboard::asset))
        .route("/events", events)
        .route("/graphql", get(dashboard::graphiql).merge(api))
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(state)
}

/// The token of an `Authorization: Bearer <token>` header.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// 401 unless the request carries an accepted bearer token; the token's [`Role`] goes on to the
/// handler. The answer never says which part was wrong beyond "missing" or "not accepted", and
/// never echoes the token.
async fn require_token(State(s): State<HttpState>, mut request: Request, next: Next) -> Response {
    let caller = bearer(request.headers()).map(|t| s.app.tokens.caller(t));
    let message = match caller {
        Some(Some(caller)) => {
            request.extensions_mut().insert(caller.role);
            request.extensions_mut().insert(caller);
            return next.run(request).await;
        }
        Some(None) => "the bearer token is not accepted",
        None => "missing bearer token: send Authorization: Bearer <token>",
    };
    tracing::debug!(message, "unauthenticated API request");
    let body = json!({
        "data": null,
        "errors": [{ "message": message, "extensions": { "code": Code::Unauthenticated.as_str() } }],
    });
    let mut resp = (StatusCode::UNAUTHORIZED, axum::Json(body)).into_response();
    resp.headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    resp
}

/// The largest request body read: a GraphQL request is a few kilobytes, and without a cap a client
/// could make the server buffer gigabytes.
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// A GraphQL error document for a request that never reached the engine (too large, not JSON).
fn refused(status: StatusCode, message: &str) -> Response {
    tracing::debug!(message, "malformed API request");
    let body = json!({
        "data": null,
        "errors": [{ "message": message, "extensions": { "code": Code::BadInput.as_str() } }],
    });
    (status, axum::Json(body)).into_response()
}

async fn graphql(State(s): State<HttpState>, request: Request) -> Response {
    // Set by `require_token`; without it the schema treats the caller as a viewer.
    let role = request.extensions().get::<Role>().copied();
    let caller = request.extensions().get::<Caller>().cloned();
    let too_large = || {
        refused(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!(
                "the request body is larger than {}",
                flxp_core::units::fmt_bytes(MAX_BODY_BYTES as u64)
            ),
        )
    };
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return too_large();
    }
    let content_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let Ok(body) = axum::body::to_bytes(request.into_body(), MAX_BODY_BYTES).await else {
        // Chunked bodies have no length up front: this is where they hit the cap (or the
        // client hung up, and then nobody reads the answer).
        return too_large();
    };
    let parsed =
        async_graphql::http::receive_body(content_type, body.as_ref(), MultipartOptions::default())
            .await;
    let req = match parsed {
        Ok(r) => {
            let r = match role {
                Some(role) => r.data(role),
                None => r,
            };
            // Who asked, by token name, for the audit log.
            match caller {
                Some(c) => r.data(c),
                None => r,
            }
        }
        Err(e) => {
            return refused(
                StatusCode::BAD_REQUEST,
                &format!("the request is not a GraphQL request: {e}"),
            );
        }
    };
    let mut resp = s.schema.execute(req).await;
    // Errors of the request itself (syntax, unknown fields, wrong types) come from the GraphQL
    // engine without a code: they are bad input.
    for e in &mut resp.errors {
        with_default_code(e);
    }
    GraphQLResponse::from(resp).into_response()
}

fn with_default_code(e: &mut ServerError) {
    let has = e
        .extensions
        .as_ref()
        .is_some_and(|x| x.get("code").is_some());
    if !has {
        e.extensions
            .get_or_insert_with(Default::default)
            .set("code", Code::BadInput.as_str());
    }
}

/// `GET /events`: the live progress stream.
async fn events(State(s): State<HttpState>) -> Response {
    s.app.live.stream().into_response()
}

async fn metrics(State(s): State<HttpState>) -> Response {
    for z in s.app.zones.values() {
        s.app
            .metrics
            .set_reservations(&z.name, z.creator.reservations().len());
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        s.app.metrics.render(),
    )
        .into_response()
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(s): State<HttpState>) -> Response {
    let mut all = true;
    let mut zones = serde_json::Map::new();
    for z in s.app.zones.values() {
        let ready = z.answered_within(s.app.ready_window);
        let contact = z.contact();
        let secs_ago = |t: tokio::time::Instant| (t.elapsed().as_secs_f64() * 10.0).round() / 10.0;
        all &= ready;
        zones.insert(
            z.name.clone(),
            json!({
                "ready": ready,
                "last_answer_secs_ago": contact.last_answer.map(secs_ago),
                "last_failure_secs_ago": contact.last_failure.map(secs_ago),
            }),
        );
    }
    let status = if all {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, axum::Json(json!({ "ready": all, "zones": zones }))).into_response()
}
