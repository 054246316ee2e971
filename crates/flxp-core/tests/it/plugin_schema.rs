//! The committed JSON Schema of the plugin protocol (`docs/plugin-protocol.schema.json`) agrees
//! with the requests flxp builds and the answers it reads: each validates, and no field is sent
//! that the schema does not declare. A small validator for the keywords the schema uses.

use flxp_core::State;
use flxp_core::builder::*;
use flxp_core::placement::{self, PlacementOptions, PlacementRequest};
use flxp_core::plugin::{
    BalanceAnswer, FilterAnswer, NodeVerdict, PROTOCOL_VERSION, PluginKind, PluginNodeScore,
    Proposal, Request, ScoreAnswer,
};
use serde_json::Value;

const SCHEMA: &str = include_str!("../../../../docs/plugin-protocol.schema.json");

fn resolve<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    match schema["$ref"].as_str() {
        Some(r) => {
            let name = r.trim_start_matches("#/$defs/");
            &root["$defs"][name]
        }
        None => schema,
    }
}

fn type_ok(t: &str, v: &Value) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        "integer" => v.is_u64() || v.is_i64(),
        "number" => v.is_number(),
        _ => panic!("unknown type {t}"),
    }
}

/// Every violation of `schema` by `v`, as `path: what`.
fn check(root: &Value, schema: &Value, v: &Value, path: &str, out: &mut Vec<String>) {
    let s = resolve(root, schema);
    if let Some(t) = s.get("type") {
        let ok = match t {
            Value::String(t) => type_ok(t, v),
            Value::Array(ts) => ts.iter().any(|t| type_ok(t.as_str().unwrap(), v)),
            _ => panic!("bad type"),
        };
        if !ok {
            out.push(format!("{path}: {v} is not {t}"));
            return;
        }
    }
    if let Some(c) = s.get("const") {
        if c != v {
            out.push(format!("{path}: {v} is not {c}"));
        }
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        if !e.contains(v) {
            out.push(format!("{path}: {v} is not one of {e:?}"));
        }
    }
    if let (Some(min), Some(n)) = (s.get("minimum").and_then(Value::as_f64), v.as_f64()) {
        if n < min {
            out.push(format!("{path}: {n} < {min}"));
        }
    }
    if let Some(obj) = v.as_object() {
        let props = s["properties"].as_object();
        for r in s["required"].as_array().into_iter().flatten() {
            if !obj.contains_key(r.as_str().unwrap()) {
                out.push(format!("{path}: missing {r}"));
            }
        }
        for (k, x) in obj {
            match props.and_then(|p| p.get(k)) {
                Some(ps) => check(root, ps, x, &format!("{path}.{k}"), out),
                None => out.push(format!("{path}: {k} is not declared")),
            }
        }
    }
    if let (Some(items), Some(arr)) = (s.get("items"), v.as_array()) {
        for (i, x) in arr.iter().enumerate() {
            check(root, items, x, &format!("{path}[{i}]"), out);
        }
    }
}

fn validate(def: &str, v: &Value) {
    let root: Value = serde_json::from_str(SCHEMA).unwrap();
    let mut errs = Vec::new();
    check(&root, &root["$defs"][def], v, def, &mut errs);
    assert!(errs.is_empty(), "{errs:#?}\n{v:#}");
}

#[test]
fn requests_and_answers_match_the_committed_schema() {
    let c = ClusterBuilder::new()
        .node(node("a").notes("flxp.label.ssd"))
        .node(node("b").offline())
        .guest(vm(101, "a").tagged("web"))
        .guest(ct(102, "a").stopped())
        .build();
    let state = State::new(&c);
    let opts = PlacementOptions::default();
    let nodes: Vec<_> = c
        .node_indexes()
        .map(|n| placement::node_figures(&c, &state, &opts, n))
        .collect();
    let req = PlacementRequest {
        memory: GIB,
        cores: 2.0,
        tags: vec!["windows;web".into()],
        ..PlacementRequest::default()
    };
    let filter = Request {
        protocol: PROTOCOL_VERSION,
        kind: PluginKind::Filter,
        plugin: "lic".into(),
        zone: Some("eu".into()),
        guest: Some(placement::new_vm_figures(&req)),
        nodes: nodes.clone(),
        guests: None,
    };
    validate("Request", &serde_json::to_value(&filter).unwrap());
    let balance = Request {
        kind: PluginKind::Balance,
        zone: None,
        guest: None,
        guests: Some(
            c.guest_indexes()
                .map(|g| placement::guest_figures(&c, &state, g))
                .collect(),
        ),
        ..filter
    };
    validate("Request", &serde_json::to_value(&balance).unwrap());

    let answers = [
        (
            "FilterAnswer",
            serde_json::to_value(FilterAnswer {
                protocol: 1,
                kind: PluginKind::Filter,
                nodes: vec![NodeVerdict {
                    node: "a".into(),
                    allowed: false,
                    reason: Some("no".into()),
                }],
            }),
        ),
        (
            "ScoreAnswer",
            serde_json::to_value(ScoreAnswer {
                protocol: 1,
                kind: PluginKind::Score,
                scores: vec![PluginNodeScore {
                    node: "a".into(),
                    score: -1.5,
                }],
            }),
        ),
        (
            "BalanceAnswer",
            serde_json::to_value(BalanceAnswer {
                protocol: 1,
                kind: PluginKind::Balance,
                migrations: vec![Proposal {
                    vmid: 101,
                    target: "b".into(),
                    reason: None,
                }],
            }),
        ),
    ];
    for (def, v) in answers {
        validate(def, &v.unwrap());
    }
}

#[test]
fn the_validator_catches_what_the_schema_forbids() {
    let root: Value = serde_json::from_str(SCHEMA).unwrap();
    let bad =
        serde_json::json!({"protocol": 2, "kind": "filter", "nodes": [{"node": 1}], "extra": 0});
    let mut errs = Vec::new();
    check(&root, &root["$defs"]["FilterAnswer"], &bad, "a", &mut errs);
    assert_eq!(errs.len(), 4, "{errs:#?}");
}
