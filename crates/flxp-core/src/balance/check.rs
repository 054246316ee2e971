//! Checking one planned migration against a freshly read cluster, and replaying a plan.
//!
//! The engine calls [`check_step`] before each migration with the cluster as Proxmox reports it at
//! that moment: if the guest moved, got locked, or the target no longer has room or would break a
//! rule, the step fails with the reasons and the engine replans instead of carrying on blindly.
//! [`replay`] applies a whole plan step by step with the same check, which is how tests and
//! `--dry-run` prove a plan safe at every intermediate state.

use serde::{Serialize, Serializer};

use crate::cluster::{Cluster, GuestIdx, GuestKind};
use crate::constraints::Rules;
use crate::placement::{Ctx, Placer, Reason, Subject};
use crate::state::State;

use super::movable::{Intent, Stay, stays};
use super::plan::Migration;
use super::units::anti_conflict;

/// A step of a plan that cannot run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepFailure {
    /// Position in the plan, from 0.
    pub step: usize,
    /// The guest.
    pub vmid: u32,
    /// Why not, one per problem.
    pub reasons: Vec<StepReason>,
}

/// Why a planned migration cannot run now; its `Display` is the line shown to users.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum StepReason {
    /// The guest is no longer in the cluster.
    #[error("guest {vmid} is not in the cluster")]
    GuestMissing {
        /// The guest.
        vmid: u32,
    },
    /// The guest is of another type than the plan has.
    #[error("guest {vmid} is of type {}, the plan has type {}", actual.as_str(), planned.as_str())]
    KindChanged {
        /// The guest.
        vmid: u32,
        /// Its type now.
        actual: GuestKind,
        /// Its type in the plan.
        planned: GuestKind,
    },
    /// The source or the target node is no longer in the cluster.
    #[error("node {from} or {to} is not in the cluster")]
    NodeMissing {
        /// The plan's source node.
        from: String,
        /// The plan's target node.
        to: String,
    },
    /// The guest is on another node than the plan's source.
    #[error("guest {vmid} is on {on}, not on {from}")]
    GuestElsewhere {
        /// The guest.
        vmid: u32,
        /// Where it is now.
        on: String,
        /// Where the plan has it.
        from: String,
    },
    /// The target is the node the guest is on.
    #[error("guest {vmid} would migrate to the node it is on")]
    SameNode {
        /// The guest.
        vmid: u32,
    },
    /// The guest may no longer be moved.
    #[error("guest {vmid}: {stay}")]
    Stays {
        /// The guest.
        vmid: u32,
        /// Why it stays.
        stay: Stay,
    },
    /// The bundle's guests must share a node and be apart at once.
    #[error("the bundle's guests must share a node and also be apart ({rule}): the rules conflict")]
    RulesConflict {
        /// The anti-affinity rule the bundle breaks.
        rule: String,
    },
    /// The target fails a placement filter.
    #[error("{node}: {filter}: {reason}")]
    Filter {
        /// The target node.
        node: String,
        /// The filter's name.
        filter: &'static str,
        /// Why the filter refuses the node.
        reason: Reason,
    },
}

/// JSON shows each reason as its line, as it did when reasons were strings.
impl Serialize for StepReason {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Compares the line users see, so tests can state reasons as text.
impl PartialEq<&str> for StepReason {
    fn eq(&self, other: &&str) -> bool {
        let line: &str = &self.to_string();
        line == *other
    }
}

/// Whether a migration may run now on this state: the guest is still where the plan has it, may
/// still be moved, and the target passes every placement filter (for a bundle: all its members
/// not yet there, together).
///
/// The cooldown and the return hold are planning rules and are not checked again here. A step
/// can only become a return between planning and running if someone else migrated the guest
/// off its source to the target and back again meanwhile: its plan moves each guest once, so
/// its own earlier steps never do this. A migration by someone else mid-run is caught here
/// already: while it runs the guest [`Stay::Migrating`]; once it lands elsewhere the guest is
/// not on the plan's source. Only a full round trip (source, target, source) within one run
/// slips through, and it is not refused: it is rare, it is someone else's doing, and the step was
/// judged worth its migration when it was planned.
pub fn check_step(
    cluster: &Cluster,
    rules: &Rules,
    state: &State,
    placer: &Placer,
    m: &Migration,
) -> Result<(), Vec<StepReason>> {
    let Some(g) = cluster.guest_idx(m.vmid) else {
        return Err(vec![StepReason::GuestMissing { vmid: m.vmid }]);
    };
    let guest = cluster.guest(g);
    let mut errs = Vec::new();
    if guest.kind != m.kind {
        errs.push(StepReason::KindChanged {
            vmid: m.vmid,
            actual: guest.kind,
            planned: m.kind,
        });
    }
    let (Some(from), Some(to)) = (cluster.node_idx(&m.from), cluster.node_idx(&m.to)) else {
        errs.push(StepReason::NodeMissing {
            from: m.from.clone(),
            to: m.to.clone(),
        });
        return Err(errs);
    };
    let at = state.location(g);
    if at != from {
        errs.push(StepReason::GuestElsewhere {
            vmid: m.vmid,
            on: cluster.node(at).name.clone(),
            from: m.from.clone(),
        });
    }
    if from == to {
        errs.push(StepReason::SameNode { vmid: m.vmid });
    }
    if let Some(stay) = stays(cluster, rules, g, Intent::Fix, 0) {
        errs.push(StepReason::Stays { vmid: m.vmid, stay });
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    let mut members: Vec<GuestIdx> = vec![g];
    for &v in &m.bundle {
        if let Some(x) = cluster.guest_idx(v) {
            if x != g && cluster.guest(x).running && state.location(x) != to {
                members.push(x);
            }
        }
    }
    members.sort();
    if let Some(rule) = anti_conflict(rules, &members) {
        return Err(vec![StepReason::RulesConflict { rule }]);
    }
    let subject = if members.len() == 1 {
        Subject::guest(cluster, rules, g, from)
    } else {
        let label = m.group.as_deref().unwrap_or("bundle");
        Subject::bundle(cluster, rules, format!("group {label}"), &members, from)
    };
    let ctx = Ctx::new(cluster, rules, state, placer.options(), &subject);
    let fails = placer.failures(&ctx, to);
    if fails.is_empty() {
        Ok(())
    } else {
        Err(fails
            .into_iter()
            .map(|(filter, _, reason)| StepReason::Filter {
                node: m.to.clone(),
                filter,
                reason,
            })
            .collect())
    }
}

/// Applies migrations in order, checking each on the state the previous ones leave; the state
/// after all of them, or the first step that cannot run.
pub fn replay(
    cluster: &Cluster,
    rules: &Rules,
    state: &State,
    placer: &Placer,
    migrations: &[Migration],
) -> Result<State, StepFailure> {
    let mut s = state.clone();
    for (step, m) in migrations.iter().enumerate() {
        check_step(cluster, rules, &s, placer, m).map_err(|reasons| StepFailure {
            step,
            vmid: m.vmid,
            reasons,
        })?;
        // check_step proved both exist.
        if let (Some(g), Some(to)) = (cluster.guest_idx(m.vmid), cluster.node_idx(&m.to)) {
            s.move_guest(cluster, g, to);
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::balance::plan::Purpose;
    use crate::cluster::GuestKind;
    use crate::testutil::*;

    fn step(vmid: u32, from: &str, to: &str, bundle: &[u32]) -> Migration {
        Migration {
            vmid,
            kind: GuestKind::Qemu,
            name: String::new(),
            from: from.into(),
            to: to.into(),
            reason: String::new(),
            purpose: Purpose::Balance,
            online: true,
            bytes: 0,
            bundle: bundle.to_vec(),
            group: (!bundle.is_empty()).then(|| "flxp.affinity.app".to_owned()),
            step: 0,
            wave: 0,
            imbalance_after: 0.0,
        }
    }

    #[test]
    fn a_step_fails_with_every_reason_in_words() {
        let c = ClusterBuilder::new()
            .node(node("a"))
            .node(node("b").memory(8 * GIB))
            .guest(
                vm(101, "a")
                    .mem(6 * GIB, 6 * GIB)
                    .tagged("flxp.affinity.app"),
            )
            .guest(
                vm(102, "a")
                    .mem(6 * GIB, 6 * GIB)
                    .tagged("flxp.affinity.app"),
            )
            .guest(ct(103, "a").locked("backup"))
            .build();
        let rules = Rules::compile(&c);
        let s = State::new(&c);
        let p = placer();
        // The reasons as the lines users see.
        let check = |m: &Migration| {
            check_step(&c, &rules, &s, &p, m)
                .map_err(|e| e.iter().map(ToString::to_string).collect::<Vec<_>>())
        };
        assert_eq!(
            check(&step(999, "a", "b", &[])),
            Err(vec!["guest 999 is not in the cluster".to_owned()])
        );
        assert_eq!(
            check(&step(103, "a", "b", &[])),
            Err(vec![
                "guest 103 is of type lxc, the plan has type qemu".to_owned(),
                "guest 103: locked (backup)".to_owned()
            ])
        );
        assert_eq!(
            check(&step(101, "a", "x", &[])),
            Err(vec!["node a or x is not in the cluster".to_owned()])
        );
        // Alone, 101 fits on b but breaks its group; with its bundle, 12 GiB do not fit in 8.
        assert_eq!(
            check(&step(101, "a", "b", &[])),
            Err(vec!["b: affinity: flxp.affinity.app runs on a".to_owned()])
        );
        let err = check(&step(101, "a", "b", &[101, 102])).unwrap_err();
        assert!(err[0].starts_with("b: memory: needs 12.0 GiB"), "{err:?}");
    }

    #[test]
    fn a_bundle_whose_guests_must_also_be_apart_is_refused() {
        let c = ClusterBuilder::new()
            .nodes(&["a", "b"])
            .guest(vm(101, "a").tagged("flxp.affinity.app;flxp.anti-affinity.x"))
            .guest(vm(102, "a").tagged("flxp.affinity.app;flxp.anti-affinity.x"))
            .build();
        let rules = Rules::compile(&c);
        let p = placer();
        let err = check_step(
            &c,
            &rules,
            &State::new(&c),
            &p,
            &step(101, "a", "b", &[101, 102]),
        )
        .unwrap_err();
        assert!(err[0].to_string().contains("the rules conflict"), "{err:?}");
    }
}
