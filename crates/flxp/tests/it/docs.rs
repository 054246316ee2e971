//! The user docs name every strategy the registry has, so none is undocumented.

use std::path::Path;

use flxp_core::balance::Registry;
use flxp_core::placement::{Policy, registry};

use super::docs_check::undocumented_methods;

fn guide() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../GUIDE.md")).unwrap()
}

#[test]
fn guide_documents_every_filter_scorer_and_policy() {
    let guide =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../GUIDE.md"))
            .unwrap();
    let names = registry::FILTERS
        .iter()
        .map(|f| f.name())
        .chain(registry::SCORERS.iter().map(|s| s.name))
        .chain(Policy::builtin_names());
    for name in names {
        assert!(
            guide.contains(&format!("`{name}`")),
            "GUIDE.md does not mention `{name}`"
        );
    }
}

#[test]
fn guide_documents_every_rebalancing_method() {
    let missing = undocumented_methods(&guide(), Registry::builtin());
    assert!(
        missing.is_empty(),
        "GUIDE.md does not document the methods {missing:?}"
    );
}

#[test]
fn sim_help_says_how_to_describe_storage_and_what_none_means() {
    let (code, out, err) = crate::run(&["sim", "--help"]);
    assert_eq!(code, 0, "{err}");
    for needle in [
        "sim.storages",
        "\"shared\": true",
        "with-local-disks",
        "A scenario without any storage gets node-local `local` and",
        "shared NFS storage `shared`",
    ] {
        assert!(
            out.contains(needle),
            "`flxp sim --help` lacks {needle:?}:\n{out}"
        );
    }
}
