//! A snapshot document (Contract 1) of any shape: parsed, built into a model, judged for status,
//! and planned on. Any error is fine; a panic, a hang or unbounded memory is a bug.
#![no_main]

use flxp_core::Overrides;
use flxp_core::Snapshot;
use flxp_core::placement::{PlacementOptions, Placer};
use flxp_engine::planning::{Goal, model, plan};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(snapshot) = Snapshot::from_json(text) else {
        return;
    };
    let Ok(model) = model(&snapshot, &Overrides::default()) else {
        return;
    };
    let _ = flxp_core::status::status(&model.cluster, &model.rules, &model.state);
    let Ok(placer) = Placer::new(PlacementOptions::default(), Vec::new()) else {
        return;
    };
    let _ = plan(&model, &placer, &Goal::Balance(Default::default()), None);
});
