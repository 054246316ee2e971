//! The one rule checker: every hard rule a cluster state breaks, as typed data (the rule, the
//! guests, the node), and the one place those breaches are put into words.
//!
//! `status`, the planner's fixer and a plan's `violations_before`/`violations_after` all read this
//! list, so what a plan says is broken is what its fixer worked from. A breach of a stopped guest
//! (on a node its pins refuse, or on a node in maintenance) is in the list, because the fixer moves
//! stopped guests there too, but it is no [`Violation`](super::Violation): it runs nowhere. Nor is
//! an ignored guest on a node in maintenance: it stays there by design.

use std::collections::BTreeMap;

use super::rules::{GroupId, GroupKind, Rules};
use crate::cluster::{Cluster, GuestIdx, MaintenanceSource, NodeIdx};
use crate::state::State;

/// One broken hard rule, with what it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Breach {
    /// A guest on a node one of its node rules (`flxp.node`, `plb_pin`, strict HA node affinity)
    /// does not allow.
    NodeRule {
        /// The guest.
        guest: GuestIdx,
        /// Where it is.
        node: NodeIdx,
        /// The rule's name (`flxp.node`, `plb_pin`, `ha:<rule-id>`).
        rule: String,
        /// The nodes the rule allows, sorted.
        allowed: Vec<NodeIdx>,
    },
    /// A guest on a node that lacks a label it selects (`flxp.select.<label>`).
    Selector {
        /// The guest.
        guest: GuestIdx,
        /// Where it is.
        node: NodeIdx,
        /// The missing label.
        label: String,
    },
    /// A guest on a node in maintenance.
    Maintenance {
        /// The guest.
        guest: GuestIdx,
        /// Where it is.
        node: NodeIdx,
    },
    /// Running members of a hard anti-affinity group sharing a node.
    Crowded {
        /// The group.
        group: GroupId,
        /// The node they share.
        node: NodeIdx,
        /// The members there, by vmid.
        guests: Vec<GuestIdx>,
    },
    /// Running members of a hard affinity group spread over several nodes.
    Split {
        /// The group.
        group: GroupId,
        /// Each node holding members, by node, with its members by vmid.
        parts: Vec<(NodeIdx, Vec<GuestIdx>)>,
    },
}

/// Every hard rule the state breaks, stopped and ignored guests included (see the module doc).
pub fn breaches(cluster: &Cluster, rules: &Rules, state: &State) -> Vec<Breach> {
    breaches_among(cluster, rules, state, cluster.guest_indexes())
}

/// The breaches of some guests: their own (guest by guest, in the order given: node rules,
/// selectors, maintenance) and then those of their hard groups (by group).
pub fn breaches_among(
    cluster: &Cluster,
    rules: &Rules,
    state: &State,
    guests: impl IntoIterator<Item = GuestIdx>,
) -> Vec<Breach> {
    let mut out = Vec::new();
    let mut groups: Vec<GroupId> = Vec::new();
    for guest in guests {
        let node = state.location(guest);
        let n = cluster.node(node);
        let r = rules.guest(guest);
        groups.extend(r.groups.iter().copied());
        for nr in r.rules_refusing(node) {
            out.push(Breach::NodeRule {
                guest,
                node,
                rule: nr.rule.clone(),
                allowed: nr.nodes.clone(),
            });
        }
        for label in r.selectors.iter().filter(|l| !n.labels.contains(*l)) {
            out.push(Breach::Selector {
                guest,
                node,
                label: label.clone(),
            });
        }
        if n.in_maintenance() {
            out.push(Breach::Maintenance { guest, node });
        }
    }
    groups.sort_unstable();
    groups.dedup();
    for id in groups {
        let group = rules.group(id);
        if !group.hard {
            continue;
        }
        let mut by_node: BTreeMap<NodeIdx, Vec<GuestIdx>> = BTreeMap::new();
        for &m in group.members.iter().filter(|&&m| cluster.guest(m).running) {
            let at = state.location(m);
            // A member in flight counts where it lands as well: for anti-affinity on its source
            // and its target (it holds both until it lands), for affinity on its target only.
            match (group.kind, cluster.guest(m).migrating_to()) {
                (GroupKind::AntiAffinity, Some(to)) if to != at => {
                    by_node.entry(at).or_default().push(m);
                    by_node.entry(to).or_default().push(m);
                }
                (GroupKind::Affinity, Some(to)) => by_node.entry(to).or_default().push(m),
                _ => by_node.entry(at).or_default().push(m),
            }
        }
        match group.kind {
            GroupKind::AntiAffinity => {
                for (node, guests) in by_node.into_iter().filter(|(_, v)| v.len() > 1) {
                    out.push(Breach::Crowded {
                        group: id,
                        node,
                        guests,
                    });
                }
            }
            GroupKind::Affinity if by_node.len() > 1 => out.push(Breach::Split {
                group: id,
                parts: by_node.into_iter().collect(),
            }),
            GroupKind::Affinity => {}
        }
    }
    out
}

impl Breach {
    /// The guest a guest's own breach is about; `None` for a group's.
    pub fn guest(&self) -> Option<GuestIdx> {
        match self {
            Self::NodeRule { guest, .. }
            | Self::Selector { guest, .. }
            | Self::Maintenance { guest, .. } => Some(*guest),
            Self::Crowded { .. } | Self::Split { .. } => None,
        }
    }

    /// The node concerned (for a split group: the first of its nodes).
    pub fn node(&self) -> Option<NodeIdx> {
        match self {
            Self::NodeRule { node, .. }
            | Self::Selector { node, .. }
            | Self::Maintenance { node, .. }
            | Self::Crowded { node, .. } => Some(*node),
            Self::Split { parts, .. } => parts.first().map(|p| p.0),
        }
    }

    /// The guests involved, in node order and then by vmid.
    pub fn guests(&self) -> Vec<GuestIdx> {
        match self {
            Self::NodeRule { guest, .. }
            | Self::Selector { guest, .. }
            | Self::Maintenance { guest, .. } => vec![*guest],
            Self::Crowded { guests, .. } => guests.clone(),
            Self::Split { parts, .. } => parts.iter().flat_map(|p| p.1.iter().copied()).collect(),
        }
    }

    /// The rule's name as the user knows it (`flxp.node`, `flxp.select.ssd`, `maintenance`, the
    /// group's tag or `ha:<rule-id>`).
    pub fn rule(&self, rules: &Rules) -> String {
        match self {
            Self::NodeRule { rule, .. } => rule.clone(),
            Self::Selector { label, .. } => format!("flxp.select.{label}"),
            Self::Maintenance { .. } => "maintenance".into(),
            Self::Crowded { group, .. } | Self::Split { group, .. } => {
                rules.group(*group).name.clone()
            }
        }
    }

    /// Whether it counts as a violation in reports: a running guest's breach, except an ignored
    /// guest's stay on a node in maintenance. Group breaches are of running members only.
    pub fn is_violation(&self, cluster: &Cluster, rules: &Rules) -> bool {
        match self {
            Self::NodeRule { guest, .. } | Self::Selector { guest, .. } => {
                cluster.guest(*guest).running
            }
            // A node a consolidation frees is emptied by choice: its guests break no rule.
            Self::Maintenance { guest, node } => {
                cluster.guest(*guest).running
                    && !rules.guest(*guest).ignore
                    && !cluster.node(*node).is_being_freed()
            }
            Self::Crowded { .. } | Self::Split { .. } => true,
        }
    }

    /// What is wrong, in a sentence (the violation's message).
    pub fn message(&self, cluster: &Cluster) -> String {
        match self {
            Self::NodeRule { guest, node, .. }
            | Self::Selector { guest, node, .. }
            | Self::Maintenance { guest, node } => {
                // A node rule names the allowed nodes, which the guest's node is not one of.
                let but = if matches!(self, Self::NodeRule { .. }) {
                    "but "
                } else {
                    ""
                };
                format!(
                    "guest {} runs on {}, {but}{}",
                    cluster.guest(*guest).label(),
                    cluster.node(*node).name,
                    self.node_lacks(cluster)
                )
            }
            Self::Crowded { node, guests, .. } => format!(
                "guests {:?} must be on different nodes but share {}",
                vmids(cluster, guests),
                cluster.node(*node).name
            ),
            Self::Split { parts, .. } => {
                let parts: Vec<String> = parts
                    .iter()
                    .map(|(n, v)| {
                        let ids: Vec<String> =
                            vmids(cluster, v).iter().map(u32::to_string).collect();
                        format!("{} on {}", ids.join(", "), cluster.node(*n).name)
                    })
                    .collect();
                format!(
                    "group must share one node but is split: {}",
                    parts.join("; ")
                )
            }
        }
    }

    /// What is wrong, as the clause of a fix's reason (`fix flxp.node: <this>`). For a group's
    /// breach the fixer words it itself (`crowded_reason`, `split_reason`), since what
    /// moves is its choice.
    pub fn reason(&self, cluster: &Cluster) -> String {
        match self {
            Self::NodeRule { guest, node, .. } | Self::Selector { guest, node, .. } => format!(
                "{} is on {}, {}",
                cluster.guest(*guest).label(),
                cluster.node(*node).name,
                self.node_lacks(cluster)
            ),
            Self::Maintenance { node, .. } => format!(
                "{} {}",
                cluster.node(*node).name,
                maintenance_clause(cluster, *node)
            ),
            Self::Crowded { .. } | Self::Split { .. } => self.message(cluster),
        }
    }

    /// For a one-guest breach, what its node lacks, as the clause shared by the message and the
    /// reason (`which lacks label ssd`); empty for a group's breach, which no one node is to
    /// blame for.
    fn node_lacks(&self, cluster: &Cluster) -> String {
        match self {
            Self::NodeRule { rule, allowed, .. } => node_rule_clause(cluster, rule, allowed),
            Self::Selector { label, .. } => format!("which lacks label {label}"),
            Self::Maintenance { node, .. } => {
                format!("which {}", maintenance_clause(cluster, *node))
            }
            Self::Crowded { .. } | Self::Split { .. } => String::new(),
        }
    }
}

/// The fix clause for a member of a crowded anti-affinity group that leaves `keeper` behind.
pub(crate) fn crowded_reason(
    cluster: &Cluster,
    guest: GuestIdx,
    node: NodeIdx,
    keeper: GuestIdx,
) -> String {
    format!(
        "{} shares {} with {}",
        cluster.guest(guest).label(),
        cluster.node(node).name,
        cluster.guest(keeper).label()
    )
}

/// The fix clause for guests that must share a node but are spread as `at` says (node → vmids).
pub(crate) fn split_reason(cluster: &Cluster, at: &BTreeMap<NodeIdx, Vec<u32>>) -> String {
    format!("members are split over {}", placement_list(cluster, at))
}

fn node_rule_clause(cluster: &Cluster, rule: &str, allowed: &[NodeIdx]) -> String {
    let names: Vec<&str> = allowed
        .iter()
        .map(|&n| cluster.node(n).name.as_str())
        .collect();
    allows_only(rule, &names)
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

/// "`rule` allows only {a, b}", or, when the rule names no node of the cluster, that (an empty
/// `{}` reads like a rendering bug).
pub(crate) fn allows_only(rule: &str, nodes: &[impl AsRef<str>]) -> String {
    if nodes.is_empty() {
        return format!("{rule} names no node of the cluster");
    }
    let names: Vec<&str> = nodes.iter().map(AsRef::as_ref).collect();
    format!("{rule} allows only {{{}}}", names.join(", "))
}

/// Why a node is emptied, as the predicate of a clause: `is in maintenance (<sources>)`, or
/// `is being freed by the consolidation` for a node only a consolidation empties.
fn maintenance_clause(cluster: &Cluster, node: NodeIdx) -> String {
    let node = cluster.node(node);
    if node.is_being_freed() {
        return format!("is {}", MaintenanceSource::Consolidation.describe());
    }
    let sources: Vec<&str> = node.maintenance.iter().map(|m| m.describe()).collect();
    format!("is in maintenance ({})", sources.join(", "))
}

fn vmids(cluster: &Cluster, guests: &[GuestIdx]) -> Vec<u32> {
    guests.iter().map(|&g| cluster.guest(g).vmid).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::*;

    #[test]
    fn stopped_and_ignored_guests_breach_but_do_not_violate() {
        let c = ClusterBuilder::new()
            .node(node("a").notes("flxp.maintenance"))
            .node(node("b"))
            .guest(vm(101, "b").tagged("flxp.node.a").stopped())
            .guest(vm(102, "a").tagged("flxp.ignore"))
            .guest(vm(103, "a"))
            .build();
        let rules = Rules::compile(&c);
        let all = breaches(&c, &rules, &State::new(&c));
        let vmid = |b: &Breach| c.guest(b.guests()[0]).vmid;
        let got: Vec<(u32, String, bool)> = all
            .iter()
            .map(|b| (vmid(b), b.rule(&rules), b.is_violation(&c, &rules)))
            .collect();
        assert_eq!(
            got,
            vec![
                (101, "flxp.node".to_owned(), false),
                (102, "maintenance".to_owned(), false),
                (103, "maintenance".to_owned(), true),
            ]
        );
        assert_eq!(
            all[2].message(&c),
            "guest 103 (qemu103) runs on a, which is in maintenance (flxp.maintenance in node notes)"
        );
    }

    /// A node a consolidation frees is emptied like one in maintenance, but its guests break no
    /// rule and the words say what it is; a node also in maintenance keeps saying so.
    #[test]
    fn a_node_being_freed_is_emptied_without_a_violation() {
        let mut c = ClusterBuilder::new()
            .node(node("a"))
            .node(node("b").notes("flxp.maintenance"))
            .node(node("c"))
            .guest(vm(101, "a"))
            .guest(vm(102, "b"))
            .build();
        for n in ["a", "b"] {
            let idx = c.node_idx(n).unwrap();
            c.empty_for(idx, MaintenanceSource::Consolidation);
        }
        let rules = Rules::compile(&c);
        let all = breaches(&c, &rules, &State::new(&c));
        let got: Vec<(u32, String, bool)> = all
            .iter()
            .map(|b| {
                let vmid = c.guest(b.guests()[0]).vmid;
                (vmid, b.reason(&c), b.is_violation(&c, &rules))
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    101,
                    "a is being freed by the consolidation".to_owned(),
                    false
                ),
                (
                    102,
                    "b is in maintenance (flxp.maintenance in node notes)".to_owned(),
                    true
                ),
            ]
        );
        assert_eq!(
            all[0].message(&c),
            "guest 101 (qemu101) runs on a, which is being freed by the consolidation"
        );
    }
}
