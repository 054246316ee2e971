//! What the user docs must say about registered strategies; a function of the registry, so a test
//! can hand it a registry with one more method and see the check demand that method's docs.

use flxp_core::balance::Registry;

/// The registry's methods GUIDE.md does not document with a list line of their own (`` - `name` ``).
pub fn undocumented_methods<'r>(guide: &str, registry: &'r Registry) -> Vec<&'r str> {
    registry
        .names()
        .filter(|name| {
            let item = format!("- `{name}`");
            !guide.lines().any(|l| l.trim_start().starts_with(&item))
        })
        .collect()
}
