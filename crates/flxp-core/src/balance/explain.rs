//! Words for plans: why a target was chosen, why no node fits (every node's failed filters,
//! condensed), and what a step changes.

use std::collections::BTreeMap;

use crate::cluster::{Cluster, NodeIdx};
use crate::placement::{Ctx, Placer, Ranked};

/// Why the first ranked node won, e.g. `pve3 has the most free memory of 4 feasible nodes`.
pub(crate) fn target_phrase(cluster: &Cluster, placer: &Placer, ranked: &[Ranked]) -> String {
    let Some(best) = ranked.first() else {
        return String::new();
    };
    let name = &cluster.node(best.node).name;
    let policy = &placer.options().policy;
    let k = ranked.len();
    let of = if k == 1 {
        "the only feasible node".to_owned()
    } else {
        format!("{k} feasible nodes")
    };
    if k == 1 {
        return format!("{name} is {of}");
    }
    match policy.as_str() {
        "free-memory" => format!("{name} has the most free memory of {of}"),
        "free-cpu" => format!("{name} has the most idle CPU of {of}"),
        "spread" => format!("{name} runs the fewest guests of {of}"),
        other => format!(
            "{name} ranks first of {of} under policy {other} (score {:.1})",
            best.score
        ),
    }
}

/// Every node's failed filters for a subject, condensed: nodes failing the same filters are listed
/// together, with the first node's reasons as an example.
///
/// `pve2, pve3: memory (e.g. pve2: needs 8.0 GiB but 3.1 GiB is available ...); pve4: memory
/// (...), anti-affinity (...)`.
pub(crate) fn condensed_failures(
    ctx: &Ctx,
    placer: &Placer,
    nodes: impl Iterator<Item = NodeIdx>,
) -> String {
    // Keyed by the failing filters in pipeline order, so groups come out most basic first.
    let order: Vec<&'static str> = crate::placement::registry::FILTERS
        .iter()
        .map(|f| f.name)
        .collect();
    type Fails = Vec<(&'static str, String)>;
    let mut groups: BTreeMap<Vec<usize>, Vec<(NodeIdx, Fails)>> = BTreeMap::new();
    for n in nodes {
        let fails: Fails = placer
            .failures(ctx, n)
            .into_iter()
            .map(|(name, _, reason)| (name, reason.to_string()))
            .collect();
        if fails.is_empty() {
            continue;
        }
        let key: Vec<usize> = fails
            .iter()
            .map(|(name, _)| order.iter().position(|o| o == name).unwrap_or(usize::MAX))
            .collect();
        groups.entry(key).or_default().push((n, fails));
    }
    if groups.is_empty() {
        return "no other node in the cluster".to_owned();
    }
    let parts: Vec<String> = groups
        .into_values()
        .map(|nodes| {
            let names: Vec<&str> = nodes
                .iter()
                .map(|(n, _)| ctx.cluster.node(*n).name.as_str())
                .collect();
            let shown = if names.len() > 6 {
                format!("{} and {} more", names[..5].join(", "), names.len() - 5)
            } else {
                names.join(", ")
            };
            let fails = &nodes[0].1;
            let example = if nodes.len() == 1 { "" } else { "e.g. " };
            let reasons: Vec<String> = fails
                .iter()
                .enumerate()
                .map(|(i, (filter, reason))| {
                    if i == 0 && nodes.len() > 1 {
                        format!("{filter} ({example}{}: {reason})", names[0])
                    } else {
                        format!("{filter} ({reason})")
                    }
                })
                .collect();
            format!("{shown}: {}", reasons.join(", "))
        })
        .collect();
    parts.join("; ")
}

/// `a (101), b (102, 103)`: where the members of a group are.
pub(crate) fn placement_list(cluster: &Cluster, at: &BTreeMap<NodeIdx, Vec<u32>>) -> String {
    at.iter()
        .map(|(n, v)| {
            let ids: Vec<String> = v.iter().map(u32::to_string).collect();
            format!("{} ({})", cluster.node(*n).name, ids.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}
