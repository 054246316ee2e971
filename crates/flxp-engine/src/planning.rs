//! Planning a round with the core: what the round is for ([`Goal`]), the cluster model built from
//! a snapshot, and guests a round must leave alone.
//!
//! Used for the first plan (by `flxp balance`, `flxp evacuate` and the daemon) and for every
//! replan during a round, so both see the cluster the same way. Pure: no I/O.

use std::collections::BTreeMap;

use flxp_core::balance::{self, BalanceOptions, EvacuateOptions, Plan};
use flxp_core::cluster::NodeIdx;
use flxp_core::placement::Placer;
use flxp_core::{Overrides, Snapshot};

use crate::error::{Error, Result};

/// What a round is for, so that it can be planned again on a fresh cluster.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Goal {
    /// Fix broken rules, then balance.
    Balance(BalanceOptions),
    /// Empty these nodes (none named: every node in maintenance).
    Evacuate {
        /// Node names.
        nodes: Vec<String>,
        /// Evacuation options.
        options: EvacuateOptions,
    },
    /// Take these guests back to the node they were evacuated from.
    ReturnHome {
        /// The home node.
        node: String,
        /// The guests recorded as at home there.
        vmids: Vec<u32>,
        /// Evacuation options (measure, metric).
        options: EvacuateOptions,
    },
}

impl Goal {
    /// Whether running containers may be moved by restarting them (`restart=1`): evacuation
    /// must empty the node, balancing only when `restart-containers` allows it.
    pub fn allows_restart(&self) -> bool {
        match self {
            Self::Balance(o) => o.restart_containers,
            Self::Evacuate { .. } | Self::ReturnHome { .. } => true,
        }
    }

    /// `balance`, `evacuate` or `return-home`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Balance(_) => "balance",
            Self::Evacuate { .. } => "evacuate",
            Self::ReturnHome { .. } => "return-home",
        }
    }
}

pub use flxp_core::Model;

/// Builds the model of a snapshot with the zone's overrides (see [`Model::from_snapshot`]).
pub fn model(snapshot: &Snapshot, overrides: &Overrides) -> Result<Model> {
    Model::from_snapshot(snapshot, overrides).map_err(|source| Error::Model { source })
}

/// The index of a node named by the user; the error lists the cluster's nodes.
pub fn node(model: &Model, name: &str) -> Result<NodeIdx> {
    model.node_named(name).ok_or_else(|| Error::UnknownNode {
        node: name.to_owned(),
        known: model.node_names(),
    })
}

/// Why a round leaves a guest alone from now on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum HoldReason {
    /// Its migration failed in this round.
    Failed,
    /// It was migrated in this round already (no guest moves twice in a round).
    Moved,
    /// Proxmox HA has a move of it queued or running (see [`ha_move_pending`]).
    HaPending,
}

impl HoldReason {
    /// The lock word the core reads: a locked guest is never moved, and the plan says why.
    pub fn lock_word(self) -> &'static str {
        match self {
            Self::Failed => "migration failed in this round",
            Self::Moved => "migrated in this round",
            Self::HaPending => "HA move pending",
        }
    }
}

/// Marks guests as locked in a snapshot so that a replan leaves them where they are (they still
/// count as load where they are).
pub fn hold_guests(snapshot: &mut Snapshot, held: &BTreeMap<u32, HoldReason>) {
    if held.is_empty() {
        return;
    }
    for r in &mut snapshot.resources {
        let is_guest = matches!(r.kind.as_deref(), Some("qemu" | "lxc"));
        if let (true, Some(vmid)) = (is_guest, r.vmid) {
            if let Some(h) = held.get(&vmid) {
                // A real lock (e.g. `migrate`) says more than ours: keep it.
                if r.lock.as_deref().is_none_or(str::is_empty) {
                    r.lock = Some(h.lock_word().to_owned());
                }
            }
        }
    }
}

/// Seconds after an `hamigrate`/`harelocate` task ends during which HA may not have started (or
/// shown) the real move yet: the CRM acts every 10 s and the LRM after it.
pub const HA_SETTLE_SECS: i64 = 60;

/// Why a guest is being moved by Proxmox HA right now although neither a lock nor a running task
/// says so: its HA request task ended less than [`HA_SETTLE_SECS`] ago (the request is queued,
/// the migration not started yet), or HA reports the service in `migrate`/`relocate`.
pub fn ha_move_pending(snapshot: &Snapshot, vmid: u32, now: i64) -> Option<String> {
    let id = vmid.to_string();
    let queued = snapshot.tasks.iter().find(|t| {
        matches!(t.kind.as_deref(), Some("hamigrate" | "harelocate"))
            && t.id.as_deref() == Some(id.as_str())
            && t.endtime.is_some_and(|end| now - end < HA_SETTLE_SECS)
    });
    if let Some(t) = queued {
        return Some(format!(
            "guest {vmid}: an HA move was requested {} s ago ({}) and may not have started yet",
            (now - t.endtime.unwrap_or(now)).max(0),
            t.kind.as_deref().unwrap_or("hamigrate")
        ));
    }
    let moving = snapshot.ha.status.iter().find(|e| {
        e.sid
            .as_deref()
            .and_then(|sid| sid.split_once(':'))
            .is_some_and(|(_, v)| v == id)
            && matches!(e.state.as_deref(), Some("migrate" | "relocate"))
    });
    moving.map(|e| {
        format!(
            "guest {vmid}: HA is moving it (service state {})",
            e.state.as_deref().unwrap_or("migrate")
        )
    })
}

/// Locks every guest with a pending HA move ([`ha_move_pending`]) so that plans leave it to HA.
pub fn hold_pending_ha(snapshot: &mut Snapshot, now: i64) {
    let pending: BTreeMap<u32, HoldReason> = snapshot
        .resources
        .iter()
        .filter(|r| matches!(r.kind.as_deref(), Some("qemu" | "lxc")))
        .filter_map(|r| r.vmid)
        .filter(|&vmid| ha_move_pending(snapshot, vmid, now).is_some())
        .map(|vmid| (vmid, HoldReason::HaPending))
        .collect();
    hold_guests(snapshot, &pending);
}

/// Plans a goal on a model; `budget` caps balancing migrations (what is left of the round's).
pub fn plan(model: &Model, placer: &Placer, goal: &Goal, budget: Option<usize>) -> Result<Plan> {
    let Model {
        cluster,
        rules,
        state,
    } = model;
    let planned = match goal {
        Goal::Balance(options) => {
            let mut options = options.clone();
            if let Some(b) = budget {
                options.max_migrations = options.max_migrations.min(b);
            }
            balance::plan(cluster, rules, state, placer, &options)
        }
        Goal::Evacuate { nodes, options } => {
            let idx = nodes
                .iter()
                .map(|n| node(model, n))
                .collect::<Result<Vec<_>>>()?;
            flxp_core::evacuate::evacuate(cluster, rules, state, placer, &idx, options)
        }
        Goal::ReturnHome {
            node: home,
            vmids,
            options,
        } => {
            let idx = node(model, home)?;
            flxp_core::return_home::return_home(cluster, rules, state, placer, idx, vmids, options)
        }
    };
    planned.map_err(|source| Error::Plan { source })
}

#[cfg(test)]
mod tests {
    // Tests may panic on malformed fixtures: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use flxp_core::placement::PlacementOptions;

    use super::*;

    const TWO_NODES: &str = r#"[
        {"id":"node/a","type":"node","node":"a","status":"online","maxmem":68719476736,"mem":51539607552,"maxcpu":16,"cpu":0.1},
        {"id":"node/b","type":"node","node":"b","status":"online","maxmem":68719476736,"mem":4294967296,"maxcpu":16,"cpu":0.1},
        {"id":"qemu/101","type":"qemu","vmid":101,"node":"a","status":"running","maxmem":17179869184,"mem":15032385536,"maxcpu":2,"cpu":0.1},
        {"id":"qemu/102","type":"qemu","vmid":102,"node":"a","status":"running","maxmem":17179869184,"mem":15032385536,"maxcpu":2,"cpu":0.1},
        {"id":"qemu/103","type":"qemu","vmid":103,"node":"a","status":"running","maxmem":8589934592,"mem":7516192768,"maxcpu":2,"cpu":0.1,"lock":"backup"}
    ]"#;

    fn placer() -> Placer {
        Placer::new(PlacementOptions::default(), Vec::new()).unwrap()
    }

    #[test]
    fn held_guests_are_locked_and_never_planned() {
        let snap = Snapshot::from_json(TWO_NODES).unwrap();
        let model = super::model(&snap, &Overrides::default()).unwrap();
        let goal = Goal::Balance(BalanceOptions::default());
        let first = plan(&model, &placer(), &goal, None).unwrap();
        assert!(!first.migrations.is_empty(), "{}", first.summary);
        let moved: Vec<u32> = first.migrations.iter().map(|m| m.vmid).collect();

        let mut held_snap = snap.clone();
        let held = moved.iter().map(|&v| (v, HoldReason::Failed)).collect();
        hold_guests(&mut held_snap, &held);
        let lock = |s: &Snapshot, vmid: u32| {
            s.resources
                .iter()
                .find(|r| r.vmid == Some(vmid))
                .and_then(|r| r.lock.clone())
        };
        assert_eq!(
            lock(&held_snap, moved[0]).as_deref(),
            Some("migration failed in this round")
        );
        assert_eq!(
            lock(&held_snap, 103).as_deref(),
            Some("backup"),
            "a real lock stays"
        );
        let model = super::model(&held_snap, &Overrides::default()).unwrap();
        let again = plan(&model, &placer(), &goal, None).unwrap();
        assert!(
            again.migrations.iter().all(|m| !moved.contains(&m.vmid)),
            "{:?}",
            again.migrations
        );
    }

    #[test]
    fn a_queued_or_running_ha_move_is_seen() {
        use flxp_core::snapshot::{HaStatusEntry, Task};
        let mut snap = Snapshot::from_json(TWO_NODES).unwrap();
        let now = 1_764_400_000;
        assert_eq!(ha_move_pending(&snap, 101, now), None);
        snap.tasks.push(Task {
            kind: Some("hamigrate".into()),
            id: Some("101".into()),
            starttime: Some(now - 31),
            endtime: Some(now - 30),
            status: Some("OK".into()),
            ..Task::default()
        });
        assert_eq!(
            ha_move_pending(&snap, 101, now).as_deref(),
            Some(
                "guest 101: an HA move was requested 30 s ago (hamigrate) and may not have started yet"
            )
        );
        assert_eq!(ha_move_pending(&snap, 101, now + 120), None, "long settled");
        assert_eq!(ha_move_pending(&snap, 102, now), None);
        snap.ha.status.push(HaStatusEntry {
            sid: Some("vm:102".into()),
            kind: Some("service".into()),
            state: Some("migrate".into()),
            ..HaStatusEntry::default()
        });
        assert_eq!(
            ha_move_pending(&snap, 102, now).as_deref(),
            Some("guest 102: HA is moving it (service state migrate)")
        );
    }

    #[test]
    fn the_budget_caps_a_replan_and_unknown_nodes_are_named() {
        let snap = Snapshot::from_json(TWO_NODES).unwrap();
        let model = super::model(&snap, &Overrides::default()).unwrap();
        let goal = Goal::Balance(BalanceOptions::default());
        assert!(
            plan(&model, &placer(), &goal, Some(0))
                .unwrap()
                .migrations
                .is_empty()
        );
        let evac = Goal::Evacuate {
            nodes: vec!["c".into()],
            options: EvacuateOptions::default(),
        };
        let e = plan(&model, &placer(), &evac, None).unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"node "c" is not in the cluster; nodes: a, b"#
        );
        assert!(evac.allows_restart());
        assert!(!goal.allows_restart());
    }
}
