//! Which guests flxp may move, and why not the others.
//!
//! Everything here is read from the snapshot: tags, locks, the task history and HA settings. No
//! memory of earlier rounds is kept; the cooldown is the time since the guest's last migration
//! task, and the return hold the time since it left a node (the node its migration task ran on),
//! so a restarted flxp sees the same thing.

use std::fmt;

use serde::Serialize;

use crate::cluster::{Cluster, GuestIdx, MaintenanceSource, NodeIdx};
use crate::constraints::Rules;
use crate::units::fmt_secs;

/// Why a guest stays where it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Stay {
    /// `flxp.ignore` or `plb_ignore*`.
    Ignored,
    /// Templates are never moved.
    Template,
    /// A config lock (backup, migrate, snapshot, ...).
    Locked {
        /// The lock.
        lock: String,
    },
    /// A migration task for it is still running.
    Migrating,
    /// It migrated less than the cooldown before the snapshot.
    Cooldown {
        /// Seconds since its last migration.
        ago_secs: i64,
        /// The cooldown.
        cooldown_secs: i64,
    },
    /// Proxmox HA manages it and Proxmox's own auto-rebalance is on: it is Proxmox's to move.
    HaAutoRebalance,
    /// Not HA-managed, for the `pve-*` methods: Proxmox's auto-rebalance moves only HA resources.
    NotHa,
    /// Its node is in Proxmox HA maintenance and HA manages it: HA moves it itself.
    HaEvacuates,
    /// Its node is not online: nothing can migrate it away.
    NodeDown {
        /// The node's status.
        status: String,
    },
    /// It is stopped: moving it changes no load.
    Stopped,
    /// A running container: LXC cannot live-migrate, and restarting it is not allowed
    /// (`restart-containers`).
    RunningContainer,
    /// Its affinity group also holds an anti-affinity pair: no node can hold the group.
    Conflict {
        /// The anti-affinity group inside the affinity group.
        rule: String,
    },
    /// Its best target is a node it left less than the return hold before the snapshot:
    /// balancing does not take a guest back there (no ping-pong).
    ReturnHold {
        /// The node it left.
        node: String,
        /// Seconds since it left.
        ago_secs: i64,
        /// The return hold.
        hold_secs: i64,
    },
}

/// The kind of a [`Stay`], without its details: how plans count guests left in place. Serialised
/// as `Stay`'s `kind` tag (`ha-auto-rebalance`, `locked`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum StayKind {
    /// [`Stay::Ignored`].
    Ignored,
    /// [`Stay::Template`].
    Template,
    /// [`Stay::Locked`].
    Locked,
    /// [`Stay::Migrating`].
    Migrating,
    /// [`Stay::Cooldown`].
    Cooldown,
    /// [`Stay::HaAutoRebalance`].
    HaAutoRebalance,
    /// [`Stay::NotHa`].
    NotHa,
    /// [`Stay::HaEvacuates`].
    HaEvacuates,
    /// [`Stay::NodeDown`].
    NodeDown,
    /// [`Stay::Stopped`].
    Stopped,
    /// [`Stay::RunningContainer`].
    RunningContainer,
    /// [`Stay::Conflict`].
    Conflict,
    /// [`Stay::ReturnHold`].
    ReturnHold,
}

impl StayKind {
    /// The name in output, as `Stay` is tagged.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ignored => "ignored",
            Self::Template => "template",
            Self::Locked => "locked",
            Self::Migrating => "migrating",
            Self::Cooldown => "cooldown",
            Self::HaAutoRebalance => "ha-auto-rebalance",
            Self::NotHa => "not-ha",
            Self::HaEvacuates => "ha-evacuates",
            Self::NodeDown => "node-down",
            Self::Stopped => "stopped",
            Self::RunningContainer => "running-container",
            Self::Conflict => "conflict",
            Self::ReturnHold => "return-hold",
        }
    }
}

impl fmt::Display for StayKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Stay {
    /// Its kind, without the details.
    pub fn kind(&self) -> StayKind {
        match self {
            Self::Ignored => StayKind::Ignored,
            Self::Template => StayKind::Template,
            Self::Locked { .. } => StayKind::Locked,
            Self::Migrating => StayKind::Migrating,
            Self::Cooldown { .. } => StayKind::Cooldown,
            Self::HaAutoRebalance => StayKind::HaAutoRebalance,
            Self::NotHa => StayKind::NotHa,
            Self::HaEvacuates => StayKind::HaEvacuates,
            Self::NodeDown { .. } => StayKind::NodeDown,
            Self::Stopped => StayKind::Stopped,
            Self::RunningContainer => StayKind::RunningContainer,
            Self::Conflict { .. } => StayKind::Conflict,
            Self::ReturnHold { .. } => StayKind::ReturnHold,
        }
    }
}

impl fmt::Display for Stay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ignored => f.write_str("tagged flxp.ignore / plb_ignore: never moved"),
            Self::Template => f.write_str("a template: never moved"),
            Self::Locked { lock } => write!(f, "locked ({lock})"),
            Self::Migrating => f.write_str("a migration of it is running"),
            Self::Cooldown {
                ago_secs,
                cooldown_secs,
            } => write!(
                f,
                "a migration of it started {ago_secs} s ago, within the {cooldown_secs} s cooldown"
            ),
            Self::HaAutoRebalance => {
                f.write_str("HA-managed while Proxmox's HA auto-rebalance is on: left to Proxmox")
            }
            Self::NotHa => {
                f.write_str("not HA-managed: Proxmox's auto-rebalance moves only HA resources")
            }
            Self::HaEvacuates => {
                f.write_str("HA-managed on a node in HA maintenance: Proxmox HA moves it")
            }
            Self::NodeDown { status } => write!(f, "its node is {status}"),
            Self::Stopped => f.write_str("stopped: moving it changes no load"),
            Self::RunningContainer => f.write_str(
                "a running container: it only moves by restarting, which restart-containers does not allow",
            ),
            Self::Conflict { rule } => write!(
                f,
                "its affinity group also must be apart ({rule}): the rules conflict, so it is not moved"
            ),
            Self::ReturnHold {
                node,
                ago_secs,
                hold_secs,
            } => write!(
                f,
                "{node} is a node it left {} ago, within the {} return hold",
                fmt_secs(*ago_secs),
                fmt_secs(*hold_secs)
            ),
        }
    }
}

/// What a move is for; balancing is held to more rules than fixing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intent {
    /// Fixing a broken hard rule or emptying a node in maintenance.
    Fix,
    /// Making room for such a fix, or balancing: the cooldown applies, stopped guests stay.
    Balance,
}

/// Whose moves are planned: flxp's own, or Proxmox's auto-rebalance as the `pve-*` methods replay
/// it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Mover {
    /// flxp's planner: HA guests are left to Proxmox while its auto-rebalance is on.
    #[default]
    Flxp,
    /// Proxmox's auto-rebalance (`Manager::load_balance`): its candidates are the HA resources
    /// only, whether or not its auto-rebalance is switched on.
    ProxmoxHa,
}

/// Why a guest may not move for this purpose when flxp plans, or `None` when it may.
pub fn stays(
    cluster: &Cluster,
    rules: &Rules,
    guest: GuestIdx,
    intent: Intent,
    cooldown_secs: i64,
) -> Option<Stay> {
    stays_for(cluster, rules, guest, intent, cooldown_secs, Mover::Flxp)
}

/// Why a guest may not move for this purpose and mover, or `None` when it may.
pub fn stays_for(
    cluster: &Cluster,
    rules: &Rules,
    guest: GuestIdx,
    intent: Intent,
    cooldown_secs: i64,
    mover: Mover,
) -> Option<Stay> {
    let g = cluster.guest(guest);
    let node = cluster.node(g.node);
    if g.template {
        return Some(Stay::Template);
    }
    if rules.guest(guest).ignore {
        return Some(Stay::Ignored);
    }
    // A node HA is fencing or has lost: HA recovers its guests, flxp must not race it.
    if !node.is_online() || node.ha_lost().is_some() {
        return Some(Stay::NodeDown {
            status: node.status_text(),
        });
    }
    if let Some(lock) = &g.lock {
        return Some(Stay::Locked { lock: lock.clone() });
    }
    // A task in flight, or a move HA was asked for and has not started yet.
    if cluster.tasks.is_migrating(g.vmid) || g.migrating.is_some() {
        return Some(Stay::Migrating);
    }
    match mover {
        Mover::Flxp if g.ha_managed && cluster.crs.auto_rebalance => {
            return Some(Stay::HaAutoRebalance);
        }
        Mover::ProxmoxHa if !g.ha_managed => return Some(Stay::NotHa),
        _ => {}
    }
    if g.ha_managed && node.maintenance.contains(&MaintenanceSource::Ha) {
        return Some(Stay::HaEvacuates);
    }
    if intent == Intent::Balance {
        if !g.running {
            return Some(Stay::Stopped);
        }
        if let (Some(now), Some(last)) = (cluster.time, cluster.tasks.last_migration(g.vmid)) {
            let ago = now - last;
            if ago < cooldown_secs {
                return Some(Stay::Cooldown {
                    ago_secs: ago.max(0),
                    cooldown_secs,
                });
            }
        }
    }
    None
}

/// Why balancing may not take a guest to `node`: it left that node by a successful migration
/// less than `hold_secs` before the snapshot (a [`Stay::ReturnHold`]), or `None` when it may
/// (also without a snapshot time, or with the hold at 0).
pub(crate) fn returns(
    cluster: &Cluster,
    guest: GuestIdx,
    node: NodeIdx,
    hold_secs: i64,
) -> Option<Stay> {
    let now = cluster.time.filter(|_| hold_secs > 0)?;
    let name = &cluster.node(node).name;
    let left = cluster.tasks.left_at(cluster.guest(guest).vmid, name)?;
    let ago = now - left;
    (ago < hold_secs).then(|| Stay::ReturnHold {
        node: name.clone(),
        ago_secs: ago.max(0),
        hold_secs,
    })
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::snapshot::Task;
    use crate::testutil::*;

    #[test]
    fn a_stay_kind_is_named_as_the_stay_is_tagged() {
        let every = [
            Stay::Ignored,
            Stay::Template,
            Stay::Locked {
                lock: "backup".into(),
            },
            Stay::Migrating,
            Stay::Cooldown {
                ago_secs: 10,
                cooldown_secs: 60,
            },
            Stay::HaAutoRebalance,
            Stay::NotHa,
            Stay::HaEvacuates,
            Stay::NodeDown {
                status: "offline".into(),
            },
            Stay::Stopped,
            Stay::RunningContainer,
            Stay::Conflict {
                rule: "apart".into(),
            },
            Stay::ReturnHold {
                node: "pve2".into(),
                ago_secs: 3_600,
                hold_secs: 21_600,
            },
        ];
        for stay in every {
            let kind = stay.kind();
            let tag = serde_json::to_value(&stay).unwrap()["kind"].clone();
            assert_eq!(serde_json::to_value(kind).unwrap(), tag, "{stay:?}");
            assert_eq!(kind.as_str(), tag, "{stay:?}");
        }
    }

    fn migration(vmid: &str, start: i64, end: Option<i64>) -> Task {
        Task {
            kind: Some("qmigrate".into()),
            id: Some(vmid.into()),
            starttime: Some(start),
            endtime: end,
            status: end.map(|_| "OK".into()),
            ..Task::default()
        }
    }

    #[test]
    fn each_reason_to_stay_is_found_and_fixes_skip_the_cooldown() {
        let c = ClusterBuilder::new()
            .node(node("a"))
            .node(node("b").offline())
            .node(node("c").hastate("maintenance"))
            .guest(vm(100, "a"))
            .guest(vm(101, "a").tagged("plb_ignore_vm"))
            .guest(vm(102, "a").template())
            .guest(vm(103, "a").locked("backup"))
            .guest(vm(104, "a"))
            .guest(vm(105, "a"))
            .guest(vm(106, "b"))
            .guest(vm(107, "c").hastate("started"))
            .guest(vm(108, "a").stopped())
            .task(migration("104", 900, None))
            .task(migration("105", 900, Some(1000)))
            .time(1600)
            .build();
        let r = Rules::compile(&c);
        let why = |vmid: u32, p: Intent| stays(&c, &r, c.guest_idx(vmid).unwrap(), p, 1800);
        assert_eq!(why(100, Intent::Balance), None);
        assert_eq!(why(101, Intent::Fix), Some(Stay::Ignored));
        assert_eq!(why(102, Intent::Fix), Some(Stay::Template));
        assert_eq!(
            why(103, Intent::Fix),
            Some(Stay::Locked {
                lock: "backup".into()
            })
        );
        assert_eq!(why(104, Intent::Fix), Some(Stay::Migrating));
        assert_eq!(
            why(105, Intent::Balance),
            Some(Stay::Cooldown {
                ago_secs: 600,
                cooldown_secs: 1800
            })
        );
        assert_eq!(why(105, Intent::Fix), None, "fixes ignore the cooldown");
        assert_eq!(
            why(106, Intent::Fix),
            Some(Stay::NodeDown {
                status: "offline".into()
            })
        );
        assert_eq!(why(107, Intent::Fix), Some(Stay::HaEvacuates));
        assert_eq!(why(108, Intent::Balance), Some(Stay::Stopped));
        assert_eq!(
            why(108, Intent::Fix),
            None,
            "stopped guests move to fix rules"
        );
    }

    #[test]
    fn ha_guests_are_left_to_proxmox_when_its_auto_rebalance_is_on() {
        let c = ClusterBuilder::new()
            .nodes(&["a", "b"])
            .guest(vm(101, "a").hastate("started"))
            .guest(vm(102, "a"))
            .option("crs", serde_json::json!("ha=dynamic,ha-auto-rebalance=1"))
            .build();
        let r = Rules::compile(&c);
        assert_eq!(
            stays(&c, &r, c.guest_idx(101).unwrap(), Intent::Fix, 0),
            Some(Stay::HaAutoRebalance)
        );
        assert_eq!(
            stays(&c, &r, c.guest_idx(102).unwrap(), Intent::Balance, 0),
            None
        );
    }
}
