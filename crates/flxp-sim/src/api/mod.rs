//! The simulated Proxmox API: one module per endpoint family, each adding its routes. Handlers
//! stay thin: read the verified [`Call`], ask the world, answer in the wire types of `flxp-pve`.
//! Anything not routed answers `501 Method 'GET /foo' not implemented`, as Proxmox does.

mod access;
mod cluster;
mod guests;
mod ha;
mod nodes;
mod pools;

use axum::Router;
use axum::extract::Request;
use axum::middleware::from_fn_with_state;
use axum::response::{IntoResponse, Response};

use crate::http::gate::{API_PREFIX, count, gate};
use crate::{ApiError, Sim};

/// The full path of an API route.
fn p(path: &str) -> String {
    format!("{API_PREFIX}{path}")
}

/// The router of the simulated API and the control endpoint, with the request gate.
pub fn router(sim: Sim) -> Router {
    let mut r: Router<Sim> = Router::new();
    r = access::routes(r);
    r = cluster::routes(r);
    r = ha::routes(r);
    r = nodes::routes(r);
    r = guests::routes(r);
    r = pools::routes(r);
    r = crate::control::routes(r);
    r.route_layer(from_fn_with_state(sim.clone(), count))
        .fallback(not_implemented)
        .method_not_allowed_fallback(not_implemented)
        .layer(from_fn_with_state(sim.clone(), gate))
        .with_state(sim)
}

async fn not_implemented(req: Request) -> Response {
    let path = req.uri().path();
    let path = path.strip_prefix(API_PREFIX).unwrap_or(path);
    ApiError::not_implemented(req.method().as_str(), path).into_response()
}
