//! Hard rules a cluster state breaks: guests where they may not be, groups split or crowded, guests
//! on nodes in maintenance. Computed for any state, so plans can show before and after.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use super::rules::{GroupKind, Rules};
use crate::cluster::{Cluster, NodeIdx};
use crate::state::State;

/// One broken hard rule.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Violation {
    /// The rule's name (`flxp.node`, `flxp.anti-affinity.web`, `ha:db-apart`, `maintenance`).
    pub rule: String,
    /// The node concerned (for a split group: the first of its nodes).
    pub node: String,
    /// Guests involved.
    pub vmids: Vec<u32>,
    /// What is wrong, in words.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.rule, self.message)
    }
}

/// Every hard rule the state breaks, sorted by rule, node and guests.
pub fn violations(cluster: &Cluster, rules: &Rules, state: &State) -> Vec<Violation> {
    let mut out = Vec::new();
    for g_idx in cluster.guest_indexes() {
        let g = cluster.guest(g_idx);
        if !g.running {
            continue;
        }
        let at = state.location(g_idx);
        let node = cluster.node(at);
        let r = rules.guest(g_idx);
        for nr in r.rules_refusing(at) {
            let allowed: Vec<&str> = nr
                .nodes
                .iter()
                .map(|&n| cluster.node(n).name.as_str())
                .collect();
            out.push(Violation {
                rule: nr.rule.clone(),
                node: node.name.clone(),
                vmids: vec![g.vmid],
                message: format!(
                    "guest {} runs on {}, but {}",
                    g.label(),
                    node.name,
                    crate::placement::allows_only(&nr.rule, &allowed)
                ),
            });
        }
        for label in r.selectors.iter().filter(|l| !node.labels.contains(*l)) {
            out.push(Violation {
                rule: format!("flxp.select.{label}"),
                node: node.name.clone(),
                vmids: vec![g.vmid],
                message: format!(
                    "guest {} runs on {}, which lacks label {label}",
                    g.label(),
                    node.name
                ),
            });
        }
        if node.in_maintenance() && !r.ignore {
            out.push(Violation {
                rule: "maintenance".into(),
                node: node.name.clone(),
                vmids: vec![g.vmid],
                message: format!(
                    "guest {} runs on {}, which is in maintenance ({})",
                    g.label(),
                    node.name,
                    node.maintenance
                        .iter()
                        .map(|m| m.describe())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
    }
    for group in rules.groups.iter().filter(|g| g.hard) {
        let mut by_node: BTreeMap<NodeIdx, Vec<u32>> = BTreeMap::new();
        for &m in &group.members {
            if cluster.guest(m).running {
                by_node
                    .entry(state.location(m))
                    .or_default()
                    .push(cluster.guest(m).vmid);
            }
        }
        match group.kind {
            GroupKind::AntiAffinity => {
                for (n, vmids) in by_node.iter().filter(|(_, v)| v.len() > 1) {
                    out.push(Violation {
                        rule: group.name.clone(),
                        node: cluster.node(*n).name.clone(),
                        vmids: vmids.clone(),
                        message: format!(
                            "guests {vmids:?} must be on different nodes but share {}",
                            cluster.node(*n).name
                        ),
                    });
                }
            }
            GroupKind::Affinity if by_node.len() > 1 => {
                let parts: Vec<String> = by_node
                    .iter()
                    .map(|(n, v)| format!("{} on {}", fmt_vmids(v), cluster.node(*n).name))
                    .collect();
                let first = by_node
                    .keys()
                    .next()
                    .map_or(String::new(), |n| cluster.node(*n).name.clone());
                out.push(Violation {
                    rule: group.name.clone(),
                    node: first,
                    vmids: by_node.values().flatten().copied().collect(),
                    message: format!(
                        "group must share one node but is split: {}",
                        parts.join("; ")
                    ),
                });
            }
            GroupKind::Affinity => {}
        }
    }
    out.sort();
    out
}

fn fmt_vmids(v: &[u32]) -> String {
    v.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::*;

    #[test]
    fn each_kind_of_broken_rule_is_reported() {
        let c = ClusterBuilder::new()
            .node(node("pve1").notes("flxp.label.ssd"))
            .node(node("pve2"))
            .node(node("pve3").notes("flxp.maintenance"))
            .guest(vm(101, "pve2").tagged("flxp.node.pve1"))
            .guest(vm(102, "pve2").tagged("flxp.select.ssd"))
            .guest(vm(103, "pve1").tagged("flxp.anti-affinity.db"))
            .guest(vm(104, "pve1").tagged("flxp.anti-affinity.db"))
            .guest(vm(105, "pve1").tagged("flxp.affinity.app"))
            .guest(vm(106, "pve2").tagged("flxp.affinity.app"))
            .guest(vm(107, "pve3"))
            .guest(vm(108, "pve2").tagged("flxp.node.pve1").stopped())
            .build();
        let rules = Rules::compile(&c);
        let v = violations(&c, &rules, &State::new(&c));
        let got: Vec<(&str, Vec<u32>)> = v
            .iter()
            .map(|v| (v.rule.as_str(), v.vmids.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("flxp.affinity.app", vec![105, 106]),
                ("flxp.anti-affinity.db", vec![103, 104]),
                ("flxp.node", vec![101]),
                ("flxp.select.ssd", vec![102]),
                ("maintenance", vec![107]),
            ]
        );
    }

    #[test]
    fn moving_a_guest_clears_its_violation() {
        let c = ClusterBuilder::new()
            .nodes(&["pve1", "pve2"])
            .guest(vm(101, "pve2").tagged("flxp.node.pve1"))
            .build();
        let rules = Rules::compile(&c);
        let mut s = State::new(&c);
        assert_eq!(violations(&c, &rules, &s).len(), 1);
        s.move_guest(&c, c.guest_idx(101).unwrap(), c.node_idx("pve1").unwrap());
        assert!(violations(&c, &rules, &s).is_empty());
    }
}
