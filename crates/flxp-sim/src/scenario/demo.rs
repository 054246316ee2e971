//! The built-in demo world (`Scenario::demo()`), kept as `scenarios/demo.json` in the crate.

use super::Scenario;

static DEMO_JSON: &str = include_str!("../../scenarios/demo.json");

/// Parses the embedded demo scenario.
pub fn scenario() -> Scenario {
    // The file is part of the crate and a test loads it; should it ever be broken, an empty
    // one-node world is still better than a panic in `flxp serve`.
    Scenario::from_json(DEMO_JSON).unwrap_or_else(|_| minimal())
}

fn minimal() -> Scenario {
    Scenario {
        snapshot: flxp_core::Snapshot {
            resources: vec![flxp_core::snapshot::raw::Resource {
                id: Some("node/pve1".into()),
                kind: Some("node".into()),
                node: Some("pve1".into()),
                status: Some("online".into()),
                maxcpu: Some(16.0),
                maxmem: Some(64 << 30),
                ..Default::default()
            }],
            ..Default::default()
        },
        sim: super::SimSection::default(),
    }
}
