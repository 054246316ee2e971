//! The flxp crate is layered one way: no file-level import cycle, no import up a layer. The
//! command line and the service share the `app` layer instead of calling each other.

#[path = "../../flxp-core/tests/it/imports.rs"]
mod imports;

/// The crate's top-level modules from the bottom up; a module may import from its own layer and
/// the ones below.
const LAYERS: &[&[&str]] = &[
    &[
        "lib", "main", "size", "terminal", "signal", "input", "journal",
    ],
    &["output", "progress"],
    &["config", "audit", "event"],
    &["plugins"],
    &["app"],
    &["notify"],
    &["serve"],
    &["cli"],
];

/// Cycles still left, as the prefixes of the files they run through: none.
const KNOWN_CYCLES: &[&[&str]] = &[];

/// Imports up a layer still left.
const KNOWN_UPWARD: &[&str] = &[];

#[test]
fn imports_run_down_the_layers_without_a_loop() {
    let graph = imports::graph(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    graph.check(LAYERS, KNOWN_CYCLES, KNOWN_UPWARD);
}
