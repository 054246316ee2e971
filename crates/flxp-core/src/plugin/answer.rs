//! Reading a plugin's answer: JSON of the right kind and version, for exactly the nodes asked.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;

use super::protocol::{
    BalanceAnswer, CallError, FilterAnswer, PROTOCOL_VERSION, PluginKind, Proposal, Request,
    ScoreAnswer,
};

/// The verdicts of a filter answer by node name (`None`: allowed, `Some(reason)`: refused).
pub fn parse_filter(
    bytes: &[u8],
    request: &Request,
) -> Result<BTreeMap<String, Option<String>>, CallError> {
    let a: FilterAnswer = decode(bytes, PluginKind::Filter)?;
    check_head(a.protocol, a.kind, PluginKind::Filter)?;
    let mut out = BTreeMap::new();
    for v in a.nodes {
        let verdict = (!v.allowed).then(|| {
            v.reason
                .filter(|r| !r.trim().is_empty())
                .unwrap_or_else(|| "refused (no reason given)".to_owned())
        });
        insert_once(&mut out, v.node, verdict, request)?;
    }
    all_answered(&out, request)?;
    Ok(out)
}

/// The raw scores of a score answer by node name; every score finite.
pub fn parse_score(bytes: &[u8], request: &Request) -> Result<BTreeMap<String, f64>, CallError> {
    let a: ScoreAnswer = decode(bytes, PluginKind::Score)?;
    check_head(a.protocol, a.kind, PluginKind::Score)?;
    let mut out = BTreeMap::new();
    for s in a.scores {
        if !s.score.is_finite() {
            return Err(CallError(format!(
                "score for node {} is not a finite number",
                s.node
            )));
        }
        insert_once(&mut out, s.node, s.score, request)?;
    }
    all_answered(&out, request)?;
    Ok(out)
}

/// The proposals of a balance answer, in order; their nodes and guests are checked by the
/// planner, which refuses each bad one with its reason.
pub fn parse_balance(bytes: &[u8]) -> Result<Vec<Proposal>, CallError> {
    let a: BalanceAnswer = decode(bytes, PluginKind::Balance)?;
    check_head(a.protocol, a.kind, PluginKind::Balance)?;
    Ok(a.migrations)
}

fn decode<T: DeserializeOwned>(bytes: &[u8], kind: PluginKind) -> Result<T, CallError> {
    // The kind is read first so that a wrong-kind answer says so rather than "missing field".
    #[derive(serde::Deserialize)]
    struct Head {
        kind: Option<serde_json::Value>,
    }
    if let Ok(Head { kind: Some(k) }) = serde_json::from_slice::<Head>(bytes) {
        if k.as_str() != Some(kind.as_str()) {
            return Err(CallError(format!(
                "answered with kind {k}, expected \"{}\"",
                kind.as_str()
            )));
        }
    }
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let at = e.path().to_string();
        let at = if at == "." {
            String::new()
        } else {
            format!(" at {at}")
        };
        CallError(format!(
            "answer is not a valid {} answer{at}: {} (starts {:?})",
            kind.as_str(),
            e.inner(),
            preview(bytes)
        ))
    })
}

fn check_head(protocol: u32, got: PluginKind, want: PluginKind) -> Result<(), CallError> {
    if protocol != PROTOCOL_VERSION {
        return Err(CallError(format!(
            "answered with protocol {protocol}, flxp speaks {PROTOCOL_VERSION}"
        )));
    }
    if got != want {
        return Err(CallError(format!(
            "answered with kind \"{}\", expected \"{}\"",
            got.as_str(),
            want.as_str()
        )));
    }
    Ok(())
}

fn insert_once<T>(
    out: &mut BTreeMap<String, T>,
    node: String,
    value: T,
    request: &Request,
) -> Result<(), CallError> {
    if !request.nodes.iter().any(|n| n.name == node) {
        return Err(CallError(format!(
            "answered for node {node:?}, which is not a candidate (candidates: {})",
            names(request)
        )));
    }
    if out.insert(node.clone(), value).is_some() {
        return Err(CallError(format!("answered twice for node {node:?}")));
    }
    Ok(())
}

fn all_answered<T>(out: &BTreeMap<String, T>, request: &Request) -> Result<(), CallError> {
    let missing: Vec<&str> = request
        .nodes
        .iter()
        .map(|n| n.name.as_str())
        .filter(|n| !out.contains_key(*n))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(CallError(format!(
            "did not answer for node(s) {}",
            missing.join(", ")
        )))
    }
}

fn names(request: &Request) -> String {
    let v: Vec<&str> = request.nodes.iter().map(|n| n.name.as_str()).collect();
    v.join(", ")
}

/// The answer's first characters, for an error message.
fn preview(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut p: String = text.chars().take(60).collect();
    if text.chars().count() > 60 {
        p.push('…');
    }
    p
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::plugin::protocol::PluginNodeFigures;

    fn request() -> Request {
        let node = |name: &str| PluginNodeFigures {
            name: name.into(),
            status: "online".into(),
            maintenance: false,
            memory_total: 0,
            memory_used: 0,
            memory_available: 0,
            memory_committed: 0,
            cpus: 0.0,
            cpu_used: 0.0,
            vcpus_committed: 0.0,
            guests: 0,
            labels: Vec::new(),
        };
        Request {
            protocol: 1,
            kind: PluginKind::Filter,
            plugin: "lic".into(),
            zone: None,
            guest: None,
            nodes: vec![node("a"), node("b")],
            guests: None,
        }
    }

    #[test]
    fn a_filter_answer_names_every_candidate_once_and_no_other() {
        let r = request();
        let ok = br#"{"protocol":1,"kind":"filter","nodes":[{"node":"a","allowed":true},{"node":"b","allowed":false,"reason":"no licence"}]}"#;
        let v = parse_filter(ok, &r).unwrap();
        assert_eq!(v["a"], None);
        assert_eq!(v["b"].as_deref(), Some("no licence"));
        let unknown = br#"{"protocol":1,"kind":"filter","nodes":[{"node":"a","allowed":true},{"node":"b","allowed":true},{"node":"zz","allowed":true}]}"#;
        let e = parse_filter(unknown, &r).unwrap_err().to_string();
        assert!(e.contains("\"zz\", which is not a candidate"), "{e}");
        let missing = br#"{"protocol":1,"kind":"filter","nodes":[{"node":"a","allowed":true}]}"#;
        let e = parse_filter(missing, &r).unwrap_err().to_string();
        assert!(e.contains("did not answer for node(s) b"), "{e}");
    }

    #[test]
    fn garbage_wrong_kinds_versions_and_non_finite_scores_are_errors() {
        let r = request();
        let e = parse_filter(b"hello", &r).unwrap_err().to_string();
        assert!(
            e.contains("not a valid filter answer") && e.contains("hello"),
            "{e}"
        );
        let e = parse_filter(br#"{"protocol":1,"kind":"score","scores":[]}"#, &r)
            .unwrap_err()
            .to_string();
        assert!(e.contains("kind \"score\", expected \"filter\""), "{e}");
        let e = parse_balance(br#"{"protocol":2,"kind":"balance","migrations":[]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("protocol 2"), "{e}");
        let e = parse_score(
            br#"{"protocol":1,"kind":"score","scores":[{"node":"a","score":"x"}]}"#,
            &r,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("scores[0].score"), "{e}");
    }
}
