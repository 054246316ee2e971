//! Helpers several test files share: the default placer, a migration task in flight, the
//! targets of a plan and the rules a state breaks.

use std::collections::BTreeSet;

use flxp_core::balance::Plan;
use flxp_core::constraints::violations;
use flxp_core::placement::{PlacementOptions, Placer};
use flxp_core::snapshot::Task;
use flxp_core::{Cluster, Rules, State};

/// A placer with the default options, no custom policies and no plugins.
pub fn placer() -> Placer {
    Placer::new(PlacementOptions::default(), Vec::new()).unwrap()
}

/// A running migration task of `vmid` from `source`, naming `target` when given.
pub fn migrating(vmid: u32, source: &str, target: Option<&str>) -> Task {
    flxp_core::builder::migration_task(vmid, source, target)
}

/// Each migration of the plan as (vmid, target), in plan order.
pub fn targets(p: &Plan) -> Vec<(u32, &str)> {
    p.migrations
        .iter()
        .map(|m| (m.vmid, m.to.as_str()))
        .collect()
}

/// Each guest the plan leaves where it is as (vmid, reason), in plan order.
pub fn skipped(p: &Plan) -> Vec<(u32, &str)> {
    p.skipped
        .iter()
        .map(|s| (s.vmid, s.reason.as_str()))
        .collect()
}

/// A broken rule: its name, node and guests.
pub type Key = (String, String, Vec<u32>);

/// The rules `s` breaks, as keys.
pub fn keys(c: &Cluster, rules: &Rules, s: &State) -> BTreeSet<Key> {
    violations(c, rules, s)
        .into_iter()
        .map(|v| (v.rule, v.node, v.vmids))
        .collect()
}

/// Whether a broken rule after a step was already broken before it: the same rule on the same
/// node with no new guest (a crowd that shrank), or the same guests (a split group).
pub fn was_broken(k: &Key, before: &BTreeSet<Key>) -> bool {
    before
        .iter()
        .any(|a| a.0 == k.0 && ((a.1 == k.1 && k.2.iter().all(|v| a.2.contains(v))) || a.2 == k.2))
}
