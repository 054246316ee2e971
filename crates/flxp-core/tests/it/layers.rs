//! flxp-core is layered one way: no file-level import cycle, no import up a layer.

use crate::imports;

/// flxp-core's top-level modules from the bottom up; a module may import from its own layer and
/// the ones below.
const LAYERS: &[&[&str]] = &[
    &[
        "lib", "error", "warning", "units", "names", "lenient", "pve_crs",
    ],
    &["snapshot"],
    &["cluster", "builder"],
    &["state"],
    &["constraints"],
    &["plugin"],
    &["placement"],
    &["balance"],
    &["evacuate", "left_running", "return_home"],
    &["consolidate", "model", "status", "graphql", "scheduler"],
];

/// Cycles still left, as the prefixes of the files they run through: the planner's files
/// call each other (a plan is replayed by the checks the planner runs), and so do the
/// consolidation's two files.
const KNOWN_CYCLES: &[&[&str]] = &[&["balance/", "placement/"], &["consolidate/"]];

/// Imports up a layer still left.
const KNOWN_UPWARD: &[&str] = &[];

#[test]
fn imports_run_down_the_layers_without_a_loop() {
    let graph = imports::graph(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    graph.check(LAYERS, KNOWN_CYCLES, KNOWN_UPWARD);
}
