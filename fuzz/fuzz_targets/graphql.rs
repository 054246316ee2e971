//! Arbitrary GraphQL documents and variables run against flxp's schema, in-process, over the
//! simulator's demo cluster (zone `sim`, nodes `pve1`..`pve4`) reached through its router
//! without a socket: parsing, validation and execution must answer every one, never panic.
//!
//! The input is the document, then a NUL byte and the variables as JSON (ignored unless they are
//! a JSON object). An input starting with byte 0x01 is a recipe for a deeply nested input value
//! instead (see [`nested`]): lists or objects, as a literal or a variable, up to 65,535 levels;
//! such values once overflowed the stack of the parser and validator. The caller has the viewer role: queries, plans and `dryRun` mutations run in
//! full; carrying a plan out or creating a VM is refused by the role check (itself fuzzed), so a
//! run has no side effect beyond reading the simulated cluster. The schema and the simulator are
//! built anew every few hundred inputs, so whatever they cache stays bounded.
#![no_main]

use std::cell::RefCell;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use axum::body::Body;
use flxp::config::{Config, Role};
use flxp::serve::schema::{self, FlxpSchema};
use flxp::serve::state::Tokens;
use flxp_pve::{Request, Transport};
use flxp_sim::{Scenario, Sim};
use libfuzzer_sys::fuzz_target;
use tower::ServiceExt;

const TOKEN: &str = "root@pam!fuzz=5f0c6a3e-2b1d-4c8e-9a7f-0e1d2c3b4a59";
/// Inputs per schema and simulated cluster.
const FRESH_EVERY: u32 = 300;
/// Answers larger than this are not read (the demo cluster's are far smaller).
const MAX_ANSWER: usize = 16 << 20;

/// Sends flxp's API calls through the simulator's router, in memory.
struct InProcess {
    router: axum::Router,
}

#[async_trait]
impl Transport for InProcess {
    async fn send(&self, request: Request) -> flxp_pve::Result<flxp_pve::Data> {
        let method = request.method.as_str().to_owned();
        let read = matches!(method.as_str(), "GET" | "DELETE");
        let mut uri = format!("/api2/json{}", request.path);
        let mut body = String::new();
        match (read, request.params) {
            (true, Some(p)) => uri = format!("{uri}?{p}"),
            (false, Some(p)) => body = p,
            _ => {}
        }
        let http = axum::http::Request::builder()
            .method(method.as_str())
            .uri(&uri)
            .header("authorization", format!("PVEAPIToken={TOKEN}"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(Body::from(body))
            .map_err(|e| flxp_pve::api_error(&method, &uri, 400, &e.to_string(), b""))?;
        let response = self
            .router
            .clone()
            .oneshot(http)
            .await
            .unwrap_or_else(|never| match never {});
        let status = response.status().as_u16();
        let bytes = axum::body::to_bytes(response.into_body(), MAX_ANSWER)
            .await
            .unwrap_or_default();
        if !(200..300).contains(&status) {
            let message = String::from_utf8_lossy(&bytes).into_owned();
            return Err(flxp_pve::api_error(&method, &uri, status, &message, &bytes));
        }
        // `data` as Proxmox's text, as the HTTP client hands it over (`null` when missing).
        let mut answer: std::collections::BTreeMap<String, flxp_pve::Data> =
            serde_json::from_slice(&bytes).unwrap_or_default();
        Ok(answer
            .remove("data")
            .unwrap_or_else(|| serde_json::value::RawValue::NULL.to_owned()))
    }
}

struct Harness {
    runtime: tokio::runtime::Runtime,
    schema: FlxpSchema,
    served: u32,
}

fn fresh_schema() -> FlxpSchema {
    let mut scenario = Scenario::demo();
    scenario.add_token(TOKEN).expect("a valid token");
    let router = Sim::new(scenario).expect("the demo scenario").router();
    let text = format!(
        "[zones.sim]\nhosts = [\"127.0.0.1:1\"]\ntoken = \"root@pam!fuzz\"\ntoken-secret = \"x\"\n{}",
        flxp::serve::embedded::CATALOG
    );
    let config = Config::parse(&text, Path::new("<fuzz>")).expect("the fuzz config");
    let transport = move |_: &str| -> anyhow::Result<Arc<dyn Transport>> {
        Ok(Arc::new(InProcess {
            router: router.clone(),
        }))
    };
    let tokens = Tokens::with_roles([("fuzz-viewer", Role::Viewer)]);
    let state = flxp::serve::state_over(&config, tokens, &transport).expect("the state");
    schema::build(state)
}

fn harness() -> Harness {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let schema = {
        let _in_runtime = runtime.enter();
        fresh_schema()
    };
    Harness {
        runtime,
        schema,
        served: 0,
    }
}

thread_local! {
    static HARNESS: RefCell<Harness> = RefCell::new(harness());
}

/// A request with a deeply nested input value, from a recipe: byte 1 and 2 the depth (big
/// endian), byte 3's bit 0 objects instead of lists, bit 1 a variable instead of a literal; the
/// rest is the innermost value (a literal's text, or JSON for a variable).
fn nested(recipe: &[u8]) -> async_graphql::Request {
    let depth = usize::from(u16::from_be_bytes([
        recipe.first().copied().unwrap_or(0),
        recipe.get(1).copied().unwrap_or(0),
    ]));
    let flags = recipe.get(2).copied().unwrap_or(0);
    let leaf = String::from_utf8_lossy(recipe.get(3..).unwrap_or_default());
    let leaf = if leaf.is_empty() { "1".into() } else { leaf };
    let objects = flags & 1 != 0;
    let as_variable = flags & 2 != 0;
    let (open, close) = match (objects, as_variable) {
        (false, _) => ("[", "]"),
        (true, false) => ("{a:", "}"),
        (true, true) => ("{\"a\":", "}"),
    };
    let value = format!("{}{leaf}{}", open.repeat(depth), close.repeat(depth));
    if as_variable {
        let request = async_graphql::Request::new(
            "query($r: PlacementInput!) { placement(zone: \"sim\", request: $r) { node } }",
        );
        // What the HTTP layer does: serde_json parses the body first (refusing past 128 levels).
        match serde_json::from_str::<serde_json::Value>(&format!("{{\"memory\": {value}}}")) {
            Ok(v) => request.variables(async_graphql::Variables::from_json(
                serde_json::json!({ "r": v }),
            )),
            Err(_) => request,
        }
    } else {
        async_graphql::Request::new(format!(
            "{{ placement(zone: \"sim\", request: {{memory: {value}}}) {{ node }} }}"
        ))
    }
}

fuzz_target!(|data: &[u8]| {
    let mut request = match data.split_first() {
        Some((&1, recipe)) => nested(recipe),
        _ => {
            let (document, variables) = match data.iter().position(|&b| b == 0) {
                Some(i) => (&data[..i], &data[i + 1..]),
                None => (data, &[][..]),
            };
            let document = String::from_utf8_lossy(document).into_owned();
            let mut request = async_graphql::Request::new(document);
            if let Ok(v @ serde_json::Value::Object(_)) = serde_json::from_slice(variables) {
                request = request.variables(async_graphql::Variables::from_json(v));
            }
            request
        }
    };
    request = request.data(Role::Viewer);
    HARNESS.with(|h| {
        let mut h = h.borrow_mut();
        h.served += 1;
        if h.served % FRESH_EVERY == 0 {
            let _in_runtime = h.runtime.enter();
            h.schema = fresh_schema();
        }
        let schema = h.schema.clone();
        let response = h.runtime.block_on(schema.execute(request));
        // Every answer serialises (what the HTTP layer sends).
        serde_json::to_vec(&response).expect("a response serialises");
    });
});
