//! Checking one planned migration against a freshly read cluster, and replaying a plan.
//!
//! The engine calls [`check_step`] before each migration with the cluster as Proxmox reports it at
//! that moment: if the guest moved, got locked, or the target no longer has room or would break a
//! rule, the step fails with the reasons and the engine replans instead of carrying on blindly.
//! [`replay`] applies a whole plan step by step with the same check, which is how tests and
//! `--dry-run` prove a plan safe at every intermediate state.

use serde::Serialize;

use crate::cluster::{Cluster, GuestIdx};
use crate::constraints::Rules;
use crate::placement::{Ctx, Placer, Subject};
use crate::state::State;

use super::movable::{Intent, stays};
use super::plan::Migration;
use super::units::anti_conflict;

/// A step of a plan that cannot run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepFailure {
    /// Position in the plan, from 0.
    pub step: usize,
    /// The guest.
    pub vmid: u32,
    /// Why not, one line per problem.
    pub reasons: Vec<String>,
}

/// Whether a migration may run now on this state: the guest is still where the plan has it, may
/// still be moved, and the target passes every placement filter (for a bundle: all its members
/// not yet there, together).
pub fn check_step(
    cluster: &Cluster,
    rules: &Rules,
    state: &State,
    placer: &Placer,
    m: &Migration,
) -> Result<(), Vec<String>> {
    let Some(g) = cluster.guest_idx(m.vmid) else {
        return Err(vec![format!("guest {} is not in the cluster", m.vmid)]);
    };
    let guest = cluster.guest(g);
    let mut errs = Vec::new();
    if guest.kind != m.kind {
        errs.push(format!(
            "guest {} is a {}, the plan has a {}",
            m.vmid,
            guest.kind.as_str(),
            m.kind.as_str()
        ));
    }
    let (Some(from), Some(to)) = (cluster.node_idx(&m.from), cluster.node_idx(&m.to)) else {
        errs.push(format!("node {} or {} is not in the cluster", m.from, m.to));
        return Err(errs);
    };
    let at = state.location(g);
    if at != from {
        errs.push(format!(
            "guest {} is on {}, not on {}",
            m.vmid,
            cluster.node(at).name,
            m.from
        ));
    }
    if from == to {
        errs.push(format!(
            "guest {} would migrate to the node it is on",
            m.vmid
        ));
    }
    if let Some(stay) = stays(cluster, rules, g, Intent::Fix, 0) {
        errs.push(format!("guest {}: {stay}", m.vmid));
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
        return Err(vec![format!(
            "the bundle's guests must share a node and also be apart ({rule}): the rules conflict"
        )]);
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
            .map(|(f, _, r)| format!("{}: {f}: {r}", m.to))
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
