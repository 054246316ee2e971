//! Back home after maintenance: the guests an evacuation took off a node go back to it once its
//! maintenance ends, as Proxmox's HA does for its own node maintenance (pve-ha-manager
//! `src/PVE/HA/Manager.pm`, the `maintenance_node` a service returns to).
//!
//! Only the guests named (those the evacuation recorded) are looked at, each moved at most once,
//! straight home: no other guest moves, so the plan has as few migrations as there are guests
//! away that may go back. A guest (or an affinity bundle, all its named members at once) goes home
//! only where the placement filters accept it on the state the earlier returns leave: memory,
//! hard rules, taints. What may not go home stays, with why (`skipped`). The return hold
//! (`[balance] return-hold-secs`) does not apply: this is a move the admin asked for. Pure: no
//! I/O.

use crate::Result;
use crate::balance::draft::{Draft, Step};
use crate::balance::planner::finish;
use crate::balance::{EvacuateOptions, Intent, Plan, PlanSource, Purpose};
use crate::cluster::{Cluster, GuestIdx, NodeIdx};
use crate::constraints::Rules;
use crate::placement::Placer;
use crate::state::State;
use crate::units::fmt_bytes;

/// Plans the return of the guests `vmids` to `home`; guests already home or gone are left out.
///
/// `Err` only for a scorer bug. Guests that may not go back are in `skipped`, with the reason.
pub fn return_home(
    cluster: &Cluster,
    rules: &Rules,
    state: &State,
    placer: &Placer,
    home: NodeIdx,
    vmids: &[u32],
    options: &EvacuateOptions,
) -> Result<Plan> {
    let measure = options.measure;
    let kind = measure.load_kind(options.metric);
    let mut draft = Draft::new(cluster, rules, placer, state, kind, measure, 0, usize::MAX);
    let mut away: Vec<GuestIdx> = vmids
        .iter()
        .filter_map(|&v| cluster.guest_idx(v))
        .filter(|&g| state.location(g) != home)
        .collect();
    away.sort();
    away.dedup();
    let home_name = cluster.node(home).name.clone();
    for &g in &away {
        if draft.has_moved(g) {
            continue;
        }
        let unit = draft.units.of(g);
        // The named members of the guest's unit that are away: a bundle goes home as one.
        let members: Vec<GuestIdx> = draft
            .units
            .get(unit)
            .members
            .iter()
            .copied()
            .filter(|m| away.contains(m) && !draft.has_moved(*m))
            .collect();
        let members = if members.is_empty() { vec![g] } else { members };
        if let Some((m, stay)) = draft.unit_stays(unit, Intent::Fix) {
            let who = cluster.guest(m).vmid;
            for &x in &members {
                draft.skip(x, format!("stays away from {home_name}: {who} {stay}"));
            }
            continue;
        }
        let label = draft.units.get(unit).group.clone();
        let subject = draft.subject(&members, label.as_deref());
        if !draft.feasible(&subject, home) {
            let why = draft.why_nowhere(
                &subject,
                &cluster
                    .node_indexes()
                    .filter(|&n| n != home)
                    .collect::<Vec<_>>(),
            );
            for &x in &members {
                draft.skip(x, format!("cannot go back to {home_name}: {why}"));
            }
            continue;
        }
        let stopped = members.len() == 1 && !cluster.guest(members[0]).running;
        let reason = format!(
            "{}back home to {home_name} after its maintenance{}",
            if stopped {
                "offline migration (guest is stopped): "
            } else {
                ""
            },
            label
                .as_deref()
                .map(|l| format!("; group {l} moves together"))
                .unwrap_or_default()
        );
        draft.apply(
            &members,
            home,
            Purpose::ReturnHome,
            &reason,
            label.as_deref(),
            Step::New,
        );
    }
    let threshold = measure.default_threshold();
    let mut plan = finish(
        draft,
        state,
        PlanSource::ReturnHome,
        threshold,
        threshold / 2.0,
    );
    plan.summary = format!(
        "back home to {home_name}: {} migration(s), {} to copy{}",
        plan.migrations.len(),
        fmt_bytes(plan.bytes),
        match plan.skipped.len() {
            0 => String::new(),
            n => format!("; {n} guest(s) stay away"),
        }
    );
    Ok(plan)
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::testutil::*;

    fn plan_home(c: &Cluster, home: &str, vmids: &[u32]) -> Plan {
        let rules = Rules::compile(c);
        let state = State::new(c);
        let n = c.node_idx(home).unwrap();
        return_home(
            c,
            &rules,
            &state,
            &placer(),
            n,
            vmids,
            &EvacuateOptions::default(),
        )
        .unwrap()
    }

    fn moves(p: &Plan) -> Vec<(u32, &str, &str)> {
        p.migrations
            .iter()
            .map(|m| (m.vmid, m.from.as_str(), m.to.as_str()))
            .collect()
    }

    #[test]
    fn only_the_named_guests_away_go_back_once_each() {
        let c = ClusterBuilder::new()
            .nodes(&["a", "b", "c"])
            .guest(vm(101, "b"))
            .guest(vm(102, "c"))
            .guest(vm(103, "a"))
            .guest(vm(104, "b"))
            .build();
        let p = plan_home(&c, "a", &[101, 102, 103, 999]);
        assert_eq!(moves(&p), vec![(101, "b", "a"), (102, "c", "a")]);
        assert!(
            p.migrations
                .iter()
                .all(|m| m.purpose == Purpose::ReturnHome)
        );
        assert_eq!(
            p.migrations[0].reason,
            "back home to a after its maintenance; spread 3.1 pp → 3.1 pp"
        );
        assert_eq!(p.summary, "back home to a: 2 migration(s), 4.0 GiB to copy");
    }

    #[test]
    fn a_guest_whose_home_would_break_a_rule_stays_and_says_why() {
        let c = ClusterBuilder::new()
            .nodes(&["a", "b"])
            .guest(vm(101, "b").tagged("flxp.anti-affinity.web"))
            .guest(vm(102, "a").tagged("flxp.anti-affinity.web"))
            .guest(vm(103, "b").tagged("flxp.ignore"))
            .build();
        let p = plan_home(&c, "a", &[101, 103]);
        assert_eq!(moves(&p), vec![]);
        let skipped: Vec<(u32, &str)> = p
            .skipped
            .iter()
            .map(|s| (s.vmid, s.reason.as_str()))
            .collect();
        assert_eq!(skipped.len(), 2, "{skipped:?}");
        assert!(
            skipped[0].1.starts_with("cannot go back to a: "),
            "{skipped:?}"
        );
        assert!(
            skipped[1].1.starts_with("stays away from a: 103 "),
            "{skipped:?}"
        );
    }

    #[test]
    fn an_affinity_group_goes_home_as_one_and_stopped_guests_offline() {
        let c = ClusterBuilder::new()
            .nodes(&["a", "b"])
            .guest(vm(101, "b").tagged("flxp.affinity.app"))
            .guest(vm(102, "b").tagged("flxp.affinity.app"))
            .guest(vm(103, "b").stopped())
            .build();
        let p = plan_home(&c, "a", &[101, 102, 103]);
        assert_eq!(
            moves(&p),
            vec![(101, "b", "a"), (102, "b", "a"), (103, "b", "a")]
        );
        assert_eq!(p.migrations[0].step, p.migrations[1].step);
        assert!(!p.migrations[2].online);
    }
}
