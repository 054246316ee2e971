//! Broken hard rules in report form: the checker's [breaches](super::breaches()) of running guests,
//! with names and words instead of indexes. Computed for any state, so plans show before and after.

use std::fmt;

use serde::Serialize;

use super::breaches::{Breach, breaches};
use super::rules::Rules;
use crate::cluster::Cluster;
use crate::state::State;

/// One broken hard rule.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[cfg_attr(feature = "graphql", derive(async_graphql::SimpleObject))]
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

impl Violation {
    /// A breach in report form.
    pub fn from_breach(breach: &Breach, cluster: &Cluster, rules: &Rules) -> Self {
        Self {
            rule: breach.rule(rules),
            node: breach
                .node()
                .map_or(String::new(), |n| cluster.node(n).name.clone()),
            vmids: breach
                .guests()
                .iter()
                .map(|&g| cluster.guest(g).vmid)
                .collect(),
            message: breach.message(cluster),
        }
    }
}

/// Every hard rule the state breaks that counts as a violation ([`Breach::is_violation`]),
/// sorted by rule, node and guests.
pub fn violations(cluster: &Cluster, rules: &Rules, state: &State) -> Vec<Violation> {
    let mut out: Vec<Violation> = breaches(cluster, rules, state)
        .iter()
        .filter(|b| b.is_violation(cluster, rules))
        .map(|b| Violation::from_breach(b, cluster, rules))
        .collect();
    out.sort();
    out
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
