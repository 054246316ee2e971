//! What moves as one: a single guest, or the running members of a hard affinity group.
//!
//! Hard affinity groups that share a member are merged (as Proxmox merges overlapping positive
//! rules), so a unit is a connected component. Its running members move together to one node;
//! stopped members are not part of it (they load nothing and follow when started, as the
//! `affinity` filter places them with their group).

use std::collections::BTreeMap;

use crate::cluster::{Cluster, GuestIdx, NodeIdx};
use crate::constraints::{GroupKind, Rules};
use crate::state::State;

/// Index of a unit in [`Units`].
pub(crate) type UnitId = usize;

/// Guests that move together.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Unit {
    /// Members, by vmid: the running members of a group, or one guest (running or not).
    pub members: Vec<GuestIdx>,
    /// The affinity groups joining them, by name (`flxp.affinity.app+ha:db`); `None` for a single.
    pub group: Option<String>,
    /// A hard anti-affinity group holding two of its members: the rules conflict.
    pub conflict: Option<String>,
}

impl Unit {
    /// Whether it is a bundle of several guests.
    pub fn is_bundle(&self) -> bool {
        self.group.is_some()
    }

    /// The node all members are on in a state, or `None` when they are split.
    pub fn node(&self, state: &State) -> Option<NodeIdx> {
        let first = state.location(*self.members.first()?);
        self.members
            .iter()
            .all(|&m| state.location(m) == first)
            .then_some(first)
    }
}

/// The first hard anti-affinity group (by name) holding two of the guests.
pub(crate) fn anti_conflict(rules: &Rules, members: &[GuestIdx]) -> Option<String> {
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for &m in members {
        for &gid in &rules.guest(m).groups {
            let g = rules.group(gid);
            if g.hard && g.kind == GroupKind::AntiAffinity {
                *count.entry(g.name.as_str()).or_default() += 1;
            }
        }
    }
    count
        .into_iter()
        .find(|(_, c)| *c > 1)
        .map(|(name, _)| name.to_owned())
}

/// Every guest's unit.
#[derive(Debug, Clone)]
pub(crate) struct Units {
    /// All units: bundles first (by group name), then single guests (by vmid).
    pub all: Vec<Unit>,
    of_guest: Vec<UnitId>,
}

impl Units {
    /// Groups the guests of a cluster into units.
    pub fn new(cluster: &Cluster, rules: &Rules) -> Self {
        let n = cluster.guests().len();
        // Union-find over guests, joined by hard affinity groups taken in name order, so the
        // result does not depend on the order groups were compiled in.
        let mut parent: Vec<usize> = (0..n).collect();
        fn root(p: &mut [usize], mut i: usize) -> usize {
            while p[i] != i {
                p[i] = p[p[i]];
                i = p[i];
            }
            i
        }
        let mut hard: Vec<&crate::constraints::Group> = rules
            .groups
            .iter()
            .filter(|g| g.hard && g.kind == GroupKind::Affinity)
            .collect();
        hard.sort_by(|a, b| a.name.cmp(&b.name));
        for group in &hard {
            let running: Vec<usize> = group
                .members
                .iter()
                .filter(|&&m| cluster.guest(m).running)
                .map(|m| m.get())
                .collect();
            for w in running.windows(2) {
                let (a, b) = (root(&mut parent, w[0]), root(&mut parent, w[1]));
                if a != b {
                    parent[a.max(b)] = a.min(b);
                }
            }
        }
        let mut members: BTreeMap<usize, Vec<GuestIdx>> = BTreeMap::new();
        for i in 0..n {
            let r = root(&mut parent, i);
            members.entry(r).or_default().push(GuestIdx(i as u32));
        }
        let mut bundles: Vec<Unit> = Vec::new();
        let mut singles: Vec<Unit> = Vec::new();
        for m in members.into_values() {
            if m.len() > 1 {
                let mut group_names: Vec<&str> = Vec::new();
                for &g in &m {
                    for &gid in &rules.guest(g).groups {
                        let grp = rules.group(gid);
                        if grp.hard && grp.kind == GroupKind::Affinity {
                            group_names.push(&grp.name);
                        }
                    }
                }
                group_names.sort_unstable();
                group_names.dedup();
                let conflict = anti_conflict(rules, &m);
                bundles.push(Unit {
                    members: m,
                    group: Some(group_names.join("+")),
                    conflict,
                });
            } else {
                singles.push(Unit {
                    members: m,
                    group: None,
                    conflict: None,
                });
            }
        }
        bundles.sort_by(|a, b| a.group.cmp(&b.group));
        let mut all = bundles;
        all.extend(singles);
        let mut of_guest = vec![0; n];
        for (id, u) in all.iter().enumerate() {
            for &m in &u.members {
                of_guest[m.get()] = id;
            }
        }
        Self { all, of_guest }
    }

    /// The unit a guest belongs to.
    pub fn of(&self, guest: GuestIdx) -> UnitId {
        self.of_guest[guest.get()]
    }

    /// A unit.
    pub fn get(&self, id: UnitId) -> &Unit {
        &self.all[id]
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::testutil::*;

    #[test]
    fn overlapping_hard_groups_merge_and_stopped_or_soft_members_stay_single() {
        let c = ClusterBuilder::new()
            .nodes(&["a", "b"])
            .guest(vm(101, "a").tagged("flxp.affinity.app"))
            .guest(vm(102, "a").tagged("flxp.affinity.app;flxp.affinity.db"))
            .guest(vm(103, "b").tagged("flxp.affinity.db"))
            .guest(vm(104, "a").tagged("flxp.affinity.app").stopped())
            .guest(vm(105, "a").tagged("flxp.prefer-affinity.x"))
            .guest(vm(106, "a").tagged("flxp.prefer-affinity.x"))
            .build();
        let r = Rules::compile(&c);
        let u = Units::new(&c, &r);
        let g = |v: u32| c.guest_idx(v).unwrap();
        let bundle = u.get(u.of(g(101)));
        assert_eq!(bundle.members, vec![g(101), g(102), g(103)]);
        assert_eq!(
            bundle.group.as_deref(),
            Some("flxp.affinity.app+flxp.affinity.db")
        );
        assert_eq!(u.of(g(103)), u.of(g(101)));
        assert!(!u.get(u.of(g(104))).is_bundle());
        assert_ne!(u.of(g(105)), u.of(g(106)), "soft groups do not bind");
        let s = State::new(&c);
        assert_eq!(bundle.node(&s), None, "split between a and b");
        assert_eq!(u.get(u.of(g(105))).node(&s), Some(c.node_idx("a").unwrap()));
    }
}
