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

/// Every node's failed filters for a subject, condensed: nodes failing the same filter are listed
/// together with the first node's reason as an example.
///
/// `pve2, pve3: memory (needs 8.0 GiB but 3.1 GiB is available ...); pve4: anti-affinity (...)`.
pub(crate) fn condensed_failures(
    ctx: &Ctx,
    placer: &Placer,
    nodes: impl Iterator<Item = NodeIdx>,
) -> String {
    // Group by the first failing filter (in pipeline order, the most basic one), which is what
    // a user has to change first.
    let mut by_filter: BTreeMap<(usize, &'static str), Vec<(NodeIdx, String)>> = BTreeMap::new();
    let order: Vec<&'static str> = crate::placement::registry::FILTERS
        .iter()
        .map(|f| f.name)
        .collect();
    let mut passing: Vec<NodeIdx> = Vec::new();
    for n in nodes {
        let fails = placer.failures(ctx, n);
        match fails.first() {
            Some((name, _, reason)) => {
                let pos = order.iter().position(|o| o == name).unwrap_or(usize::MAX);
                by_filter
                    .entry((pos, name))
                    .or_default()
                    .push((n, reason.to_string()));
            }
            None => passing.push(n),
        }
    }
    if by_filter.is_empty() {
        return "no other node in the cluster".to_owned();
    }
    let parts: Vec<String> = by_filter
        .into_iter()
        .map(|((_, filter), nodes)| {
            let names: Vec<&str> = nodes
                .iter()
                .map(|(n, _)| ctx.cluster.node(*n).name.as_str())
                .collect();
            let shown = if names.len() > 6 {
                format!("{} and {} more", names[..5].join(", "), names.len() - 5)
            } else {
                names.join(", ")
            };
            let example = &nodes[0].1;
            if nodes.len() == 1 {
                format!("{shown}: {filter} ({example})")
            } else {
                format!("{shown}: {filter} (e.g. {}: {example})", names[0])
            }
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
