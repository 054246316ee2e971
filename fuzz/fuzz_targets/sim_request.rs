//! Requests of any method, path and form body sent to the simulator's router (no socket): its
//! parameter checks must answer every one with a status, never panic. The first byte picks the
//! method, the rest up to a newline is the path and query, the remainder the form body. The
//! simulated cluster is built anew every few hundred requests, so what the requests create
//! stays bounded.
#![no_main]

use std::cell::RefCell;

use axum::body::Body;
use axum::http::Request;
use flxp_sim::{Scenario, Sim};
use libfuzzer_sys::fuzz_target;
use tower::ServiceExt;

const TOKEN: &str = "root@pam!fuzz=5f0c6a3e-2b1d-4c8e-9a7f-0e1d2c3b4a59";
/// Requests per simulated cluster.
const FRESH_EVERY: u32 = 500;

struct Harness {
    runtime: tokio::runtime::Runtime,
    router: axum::Router,
    served: u32,
}

fn fresh_router() -> axum::Router {
    let mut scenario = Scenario::demo();
    scenario.add_token(TOKEN).expect("a valid token");
    Sim::new(scenario).expect("the demo scenario").router()
}

thread_local! {
    static HARNESS: RefCell<Harness> = RefCell::new(Harness {
        runtime: tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime"),
        router: fresh_router(),
        served: 0,
    });
}

fuzz_target!(|data: &[u8]| {
    let Some((&m, rest)) = data.split_first() else {
        return;
    };
    let method = ["GET", "POST", "PUT", "DELETE"][usize::from(m % 4)];
    let rest = String::from_utf8_lossy(rest);
    let (path, body) = rest.split_once('\n').unwrap_or((&rest, ""));
    // The control endpoint can add latency faults: not a request a client of Proxmox sends.
    if path.contains("_sim") {
        return;
    }
    let uri = format!("/api2/json/{}", path.trim_start_matches('/'));
    let Ok(request) = Request::builder()
        .method(method)
        .uri(uri)
        .header("authorization", format!("PVEAPIToken={TOKEN}"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(Body::from(body.to_owned()))
    else {
        return;
    };
    HARNESS.with(|h| {
        let mut h = h.borrow_mut();
        h.served += 1;
        if h.served % FRESH_EVERY == 0 {
            h.router = fresh_router();
        }
        let router = h.router.clone();
        // The router's error type is `Infallible`: every request gets a response.
        let Ok(response) = h.runtime.block_on(router.oneshot(request));
        assert!(response.status().as_u16() < 600);
    });
});
