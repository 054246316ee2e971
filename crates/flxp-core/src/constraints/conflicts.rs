//! Rules that cannot all hold, found before any decision is made.
//!
//! Checked: a guest no node can host (node rules and selectors exclude every node); an affinity
//! group (hard groups sharing members are merged, as Proxmox merges positive rules) whose members
//! cannot meet on any one node; an anti-affinity group with more members than distinct nodes can
//! host (by bipartite matching, so it is exact); a pair that must be both together and apart.

use std::collections::BTreeSet;

use super::rules::{Conflict, GroupKind, Rules};
use crate::cluster::{Cluster, GuestIdx, NodeIdx};

/// Nodes a guest may ever be on by its node rules and selectors (taints only bar new arrivals).
pub fn eligible_nodes(cluster: &Cluster, rules: &Rules, guest: GuestIdx) -> Vec<NodeIdx> {
    let r = rules.guest(guest);
    cluster
        .node_indexes()
        .filter(|&n| {
            r.allows(n)
                && r.selectors
                    .iter()
                    .all(|l| cluster.node(n).labels.contains(l))
        })
        .collect()
}

pub(super) fn find(cluster: &Cluster, rules: &Rules) -> Vec<Conflict> {
    let mut out = Vec::new();
    let relevant = |g: &GuestIdx| !cluster.guest(*g).template;
    let eligible: Vec<Option<Vec<NodeIdx>>> = cluster
        .guest_indexes()
        .map(|g| {
            let r = rules.guest(g);
            (!r.node_rules.is_empty() || !r.selectors.is_empty())
                .then(|| eligible_nodes(cluster, rules, g))
        })
        .collect();
    let all_nodes: Vec<NodeIdx> = cluster.node_indexes().collect();
    let nodes_of = |g: GuestIdx| eligible[g.get()].as_deref().unwrap_or(&all_nodes);

    for g in cluster.guest_indexes().filter(relevant) {
        if nodes_of(g).is_empty() {
            let r = rules.guest(g);
            let mut names: Vec<String> = r.node_rules.iter().map(|n| n.rule.clone()).collect();
            names.extend(r.selectors.iter().map(|s| format!("flxp.select.{s}")));
            out.push(Conflict {
                rules: names,
                message: format!(
                    "guest {} can run on no node of the cluster",
                    cluster.guest(g).label()
                ),
            });
        }
    }

    for component in affinity_components(rules) {
        let members: Vec<GuestIdx> = component
            .iter()
            .flat_map(|&id| rules.groups[id].members.iter().copied())
            .filter(relevant)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let names: Vec<String> = component
            .iter()
            .map(|&id| rules.groups[id].name.clone())
            .collect();
        // Only restricted members narrow the common nodes; the lists are sorted, so intersect by merge.
        let mut common: Option<Vec<NodeIdx>> = None;
        for &g in &members {
            if let Some(mine) = eligible[g.get()].as_deref() {
                common = Some(match common {
                    None => mine.to_vec(),
                    Some(acc) => intersect_sorted(&acc, mine),
                });
            }
        }
        let common = common.unwrap_or_else(|| all_nodes.clone());
        if common.is_empty() && members.len() > 1 {
            let detail: Vec<String> = members
                .iter()
                .filter(|&&g| eligible[g.get()].is_some())
                .map(|&g| {
                    let nodes: Vec<&str> = nodes_of(g)
                        .iter()
                        .map(|&n| cluster.node(n).name.as_str())
                        .collect();
                    format!("{} → {{{}}}", cluster.guest(g).vmid, nodes.join(", "))
                })
                .collect();
            let mut rule_names = names.clone();
            let mut seen: BTreeSet<&str> = names.iter().map(String::as_str).collect();
            for &g in &members {
                for nr in &rules.guest(g).node_rules {
                    if seen.insert(&nr.rule) {
                        rule_names.push(nr.rule.clone());
                    }
                }
            }
            out.push(Conflict {
                rules: rule_names,
                message: format!(
                    "affinity group members are restricted to disjoint nodes ({}): they cannot share a node",
                    detail.join("; ")
                ),
            });
        }
        // Hard anti-affinity groups holding two or more of these members (found through the
        // members' own groups, so the cost follows memberships, not the number of groups).
        let mut apart: std::collections::BTreeMap<usize, Vec<u32>> = Default::default();
        for &m in &members {
            for gid in &rules.guest(m).groups {
                let g = &rules.groups[gid.get()];
                if g.kind == GroupKind::AntiAffinity && g.hard {
                    apart
                        .entry(gid.get())
                        .or_default()
                        .push(cluster.guest(m).vmid);
                }
            }
        }
        for (id, both) in apart.into_iter().filter(|(_, v)| v.len() >= 2) {
            let mut rule_names = names.clone();
            rule_names.push(rules.groups[id].name.clone());
            out.push(Conflict {
                rules: rule_names,
                message: format!(
                    "guests {both:?} must be on one node and on different nodes at once"
                ),
            });
        }
    }

    for group in &rules.groups {
        if group.kind != GroupKind::AntiAffinity || !group.hard {
            continue;
        }
        // A member no node can host has its own conflict above; without it, fewer than two
        // members cannot break "apart" (else a guest in many groups repeats one conflict per group).
        let members: Vec<GuestIdx> = group
            .members
            .iter()
            .copied()
            .filter(|g| relevant(g) && !nodes_of(*g).is_empty())
            .collect();
        if members.len() < 2 {
            continue;
        }
        let adjacency: Vec<Option<&[NodeIdx]>> = members
            .iter()
            .map(|&g| eligible[g.get()].as_deref())
            .collect();
        let matched = max_matching(&adjacency, cluster.nodes().len());
        if matched < members.len() {
            let hostable: BTreeSet<NodeIdx> = members
                .iter()
                .flat_map(|&g| nodes_of(g).iter().copied())
                .collect();
            out.push(Conflict {
                rules: vec![group.name.clone()],
                message: format!(
                    "{} members must be on different nodes, but the nodes allowed to them ({}) can host at most {} apart",
                    members.len(),
                    hostable.len(),
                    matched
                ),
            });
        }
    }
    out
}

fn intersect_sorted(a: &[NodeIdx], b: &[NodeIdx]) -> Vec<NodeIdx> {
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out
}

/// Hard affinity groups, merged where they share a member (as indexes into `Rules::groups`).
///
/// Linear in the number of memberships: each guest unites the hard affinity groups it is in.
fn affinity_components(rules: &Rules) -> Vec<Vec<usize>> {
    let is_hard_affinity =
        |i: usize| rules.groups[i].kind == GroupKind::Affinity && rules.groups[i].hard;
    let mut parent: Vec<usize> = (0..rules.groups.len()).collect();
    fn root(p: &mut [usize], mut i: usize) -> usize {
        while p[i] != i {
            p[i] = p[p[i]];
            i = p[i];
        }
        i
    }
    for guest in &rules.guests {
        let mut first: Option<usize> = None;
        for g in guest
            .groups
            .iter()
            .map(|g| g.get())
            .filter(|&g| is_hard_affinity(g))
        {
            match first {
                None => first = Some(g),
                Some(f) => {
                    let (ra, rb) = (root(&mut parent, f), root(&mut parent, g));
                    parent[ra.max(rb)] = ra.min(rb);
                }
            }
        }
    }
    let mut comps: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
    for g in (0..rules.groups.len()).filter(|&g| is_hard_affinity(g)) {
        let r = root(&mut parent, g);
        comps.entry(r).or_default().push(g);
    }
    comps.into_values().collect()
}

/// Size of a maximum matching of members to distinct nodes.
///
/// Members allowed everywhere (`None`) are counted, not searched: any maximum matching of the
/// restricted members uses exactly that many nodes, and the unrestricted ones can take any other,
/// so the total is `restricted + min(unrestricted, nodes − restricted)`. The restricted ones are
/// matched with Kuhn's augmenting paths over a visited array stamped per round (no reallocation).
fn max_matching(adjacency: &[Option<&[NodeIdx]>], nodes: usize) -> usize {
    fn augment(
        u: usize,
        adj: &[&[NodeIdx]],
        seen: &mut [u32],
        stamp: u32,
        owner: &mut [Option<usize>],
    ) -> bool {
        for &n in adj[u] {
            let n = n.get();
            if seen[n] == stamp {
                continue;
            }
            seen[n] = stamp;
            if owner[n].is_none_or(|v| augment(v, adj, seen, stamp, owner)) {
                owner[n] = Some(u);
                return true;
            }
        }
        false
    }
    let restricted: Vec<&[NodeIdx]> = adjacency.iter().filter_map(|a| *a).collect();
    let unrestricted = adjacency.len() - restricted.len();
    let mut matched = 0;
    if !restricted.is_empty() {
        let mut owner = vec![None; nodes];
        let mut seen = vec![0u32; nodes];
        for u in 0..restricted.len() {
            if augment(u, &restricted, &mut seen, u as u32 + 1, &mut owner) {
                matched += 1;
            }
        }
    }
    matched + unrestricted.min(nodes - matched)
}
#[cfg(test)]
mod tests {
    use crate::constraints::Rules;
    use crate::testutil::*;

    fn conflicts(b: ClusterBuilder) -> Vec<String> {
        let c = b.build();
        Rules::compile(&c)
            .conflicts
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn affinity_group_pinned_to_disjoint_nodes_is_a_conflict() {
        let got = conflicts(
            ClusterBuilder::new()
                .nodes(&["pve1", "pve2", "pve3"])
                .guest(vm(101, "pve1").tagged("flxp.affinity.app;flxp.node.pve1"))
                .guest(vm(102, "pve2").tagged("flxp.affinity.app;flxp.node.pve2")),
        );
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].contains("flxp.affinity.app"), "{got:?}");
        assert!(got[0].contains("101 → {pve1}"), "{got:?}");
    }

    #[test]
    fn anti_affinity_group_larger_than_its_nodes_is_a_conflict() {
        let got = conflicts(
            ClusterBuilder::new()
                .nodes(&["pve1", "pve2", "pve3"])
                .guest(
                    vm(101, "pve1").tagged("flxp.anti-affinity.db;flxp.node.pve1;flxp.node.pve2"),
                )
                .guest(
                    vm(102, "pve2").tagged("flxp.anti-affinity.db;flxp.node.pve1;flxp.node.pve2"),
                )
                .guest(
                    vm(103, "pve1").tagged("flxp.anti-affinity.db;flxp.node.pve1;flxp.node.pve2"),
                ),
        );
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(
            got[0].contains("3 members") && got[0].contains("at most 2"),
            "{got:?}"
        );
    }

    #[test]
    fn anti_affinity_that_fits_is_not_a_conflict() {
        let got = conflicts(
            ClusterBuilder::new()
                .nodes(&["pve1", "pve2", "pve3"])
                .guest(vm(101, "pve1").tagged("flxp.anti-affinity.db;flxp.node.pve1"))
                .guest(
                    vm(102, "pve2").tagged("flxp.anti-affinity.db;flxp.node.pve1;flxp.node.pve2"),
                )
                .guest(vm(103, "pve1").tagged("flxp.anti-affinity.db")),
        );
        assert!(got.is_empty(), "{got:?}");
    }

    #[test]
    fn together_and_apart_at_once_is_a_conflict() {
        let got = conflicts(
            ClusterBuilder::new()
                .nodes(&["pve1", "pve2"])
                .guest(vm(101, "pve1").tagged("flxp.affinity.a;flxp.anti-affinity.b"))
                .guest(vm(102, "pve1").tagged("flxp.affinity.a;flxp.anti-affinity.b")),
        );
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(
            got[0].contains("together") || got[0].contains("at once"),
            "{got:?}"
        );
    }

    #[test]
    fn selector_matching_no_node_is_a_conflict() {
        let got = conflicts(
            ClusterBuilder::new()
                .node(node("pve1").notes("flxp.label.ssd"))
                .guest(vm(101, "pve1").tagged("flxp.select.nvme")),
        );
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].contains("flxp.select.nvme"), "{got:?}");
    }
}
