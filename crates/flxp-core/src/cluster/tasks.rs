//! What the task history says about guests: migrations in flight, recent ones, the nodes they
//! left, guests starting.
//!
//! This is how flxp stays stateless: cooldowns, the return hold and "already moving" are read from
//! Proxmox's `/cluster/tasks`, never remembered.

use std::collections::{BTreeMap, BTreeSet};

use crate::snapshot::Task;

/// Task types that move a guest between nodes.
const MIGRATION_TYPES: [&str; 4] = ["qmigrate", "vzmigrate", "hamigrate", "harelocate"];
/// Task types that start a guest.
const START_TYPES: [&str; 3] = ["qmstart", "vzstart", "hastart"];

/// Facts derived from the task list, by vmid.
#[derive(Debug, Clone, Default)]
pub struct TaskIndex {
    /// Running migrations, with their target node when the task entry names it.
    migrating: BTreeMap<u32, Option<String>>,
    /// Of running migrations, the share of the guest's memory already on its target's figure.
    arrived: BTreeMap<u32, f64>,
    starting: BTreeSet<u32>,
    last_migration: BTreeMap<u32, i64>,
    /// Per vmid, the nodes it left by a successful migration, each with the newest such time.
    left: BTreeMap<u32, BTreeMap<String, i64>>,
    newest: Option<i64>,
}

impl TaskIndex {
    /// Indexes a task list.
    pub fn new(tasks: &[Task]) -> Self {
        let mut ix = Self::default();
        for t in tasks {
            let time = t.endtime.or(t.starttime);
            if let Some(time) = time {
                ix.newest = Some(ix.newest.map_or(time, |n| n.max(time)));
            }
            let Some(kind) = t.kind.as_deref() else {
                continue;
            };
            let Some(vmid) = t.id.as_deref().and_then(|id| id.parse::<u32>().ok()) else {
                continue;
            };
            if MIGRATION_TYPES.contains(&kind) {
                if t.is_running() {
                    let target = t.target.clone().filter(|n| !n.is_empty());
                    let e = ix.migrating.entry(vmid).or_insert(None);
                    *e = e.take().or(target);
                    // A share outside 0..1 (a hand-written snapshot) is cut to it; not a number
                    // is none.
                    if let Some(share) = t.arrived.filter(|a| !a.is_nan()) {
                        let e = ix.arrived.entry(vmid).or_insert(0.0);
                        *e = e.max(share.clamp(0.0, 1.0));
                    }
                }
                if let Some(time) = time {
                    let e = ix.last_migration.entry(vmid).or_insert(time);
                    *e = (*e).max(time);
                }
                // A migration task runs on the guest's source node (qemu-server PVE/API2/Qemu.pm
                // `migrate_vm` has `proxyto => 'node'`, the guest's node), so its UPID names the
                // node the guest left; only a finished, successful one left it.
                if let (Some(time), Some(node)) = (time, source_node(t))
                    && !t.is_running()
                    && t.status.as_deref().is_some_and(succeeded)
                {
                    let e = ix
                        .left
                        .entry(vmid)
                        .or_default()
                        .entry(node.to_owned())
                        .or_insert(time);
                    *e = (*e).max(time);
                }
            } else if START_TYPES.contains(&kind) && t.is_running() {
                ix.starting.insert(vmid);
            }
        }
        ix
    }

    /// Whether a migration task for this guest is still running.
    pub fn is_migrating(&self, vmid: u32) -> bool {
        self.migrating.contains_key(&vmid)
    }

    /// Where a running migration of this guest goes, when known.
    pub fn migration_target(&self, vmid: u32) -> Option<&str> {
        self.migrating.get(&vmid)?.as_deref()
    }

    /// Of a guest with a running migration, the share of its memory its target's reported use
    /// already holds (0 when its task does not say).
    pub fn arrived(&self, vmid: u32) -> f64 {
        self.arrived.get(&vmid).copied().unwrap_or(0.0)
    }

    /// Guests with a running migration, by vmid, with their target node when known.
    pub fn migrations(&self) -> impl Iterator<Item = (u32, Option<&str>)> + '_ {
        self.migrating.iter().map(|(&v, t)| (v, t.as_deref()))
    }

    /// Whether a start task for this guest is still running.
    pub fn is_starting(&self, vmid: u32) -> bool {
        self.starting.contains(&vmid)
    }

    /// When this guest last migrated (task end, or start while running), epoch seconds.
    pub fn last_migration(&self, vmid: u32) -> Option<i64> {
        self.last_migration.get(&vmid).copied()
    }

    /// When this guest last left `node` by a successful migration (task end), epoch seconds.
    pub fn left_at(&self, vmid: u32, node: &str) -> Option<i64> {
        self.left.get(&vmid)?.get(node).copied()
    }

    /// The nodes this guest left by a successful migration, each with the newest such time, in
    /// node name order.
    pub fn departures(&self, vmid: u32) -> impl Iterator<Item = (&str, i64)> + '_ {
        self.left
            .get(&vmid)
            .into_iter()
            .flat_map(|m| m.iter().map(|(n, &t)| (n.as_str(), t)))
    }

    /// The newest task time seen, a stand-in for "now" when the snapshot has no time.
    pub fn newest_time(&self) -> Option<i64> {
        self.newest
    }
}

/// The node a task ran on: the UPID's (`UPID:{node}:...`), else the entry's `node` field.
fn source_node(t: &Task) -> Option<&str> {
    t.upid
        .as_deref()
        .and_then(|u| u.strip_prefix("UPID:"))
        .and_then(|rest| rest.split(':').next())
        .or(t.node.as_deref())
        .filter(|n| !n.is_empty())
}

/// Proxmox's success rule for a task's exit status: `OK` or `WARNINGS: <n>` (pve-common
/// `PVE/Tools.pm` `upid_status_is_error`).
fn succeeded(status: &str) -> bool {
    status == "OK"
        || status
            .strip_prefix("WARNINGS: ")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(kind: &str, id: &str, start: i64, end: Option<i64>) -> Task {
        Task {
            kind: Some(kind.into()),
            id: Some(id.into()),
            starttime: Some(start),
            endtime: end,
            status: end.map(|_| "OK".into()),
            ..Task::default()
        }
    }

    #[test]
    fn running_and_recent_migrations_are_found() {
        let ix = TaskIndex::new(&[
            task("qmigrate", "101", 100, Some(160)),
            task("qmigrate", "101", 10, Some(20)),
            task("hamigrate", "102", 200, None),
            Task {
                target: Some("pve2".into()),
                ..task("qmigrate", "105", 220, None)
            },
            task("qmstart", "103", 210, None),
            task("vncproxy", "104", 300, Some(400)),
        ]);
        assert!(!ix.is_migrating(101));
        assert_eq!(ix.last_migration(101), Some(160));
        assert!(ix.is_migrating(102));
        assert!(ix.is_starting(103));
        assert_eq!(ix.migration_target(102), None);
        assert_eq!(ix.newest_time(), Some(400));
        assert_eq!(ix.migration_target(105), Some("pve2"));
    }

    /// A finished migration task as `/cluster/tasks` lists it, run on `node`.
    fn finished(kind: &str, vmid: u32, node: &str, end: i64, status: &str) -> Task {
        Task {
            upid: Some(format!(
                "UPID:{node}:00001234:00005678:{:08X}:{kind}:{vmid}:root@pam:",
                end - 30
            )),
            node: Some(node.into()),
            kind: Some(kind.into()),
            id: Some(vmid.to_string()),
            starttime: Some(end - 30),
            endtime: Some(end),
            status: Some(status.into()),
            ..Task::default()
        }
    }

    #[test]
    fn the_node_a_successful_migration_ran_on_is_the_node_its_guest_left() {
        let ix = TaskIndex::new(&[
            finished("qmigrate", 101, "pve2", 1_000, "OK"),
            finished("qmigrate", 101, "pve2", 400, "OK"),
            finished("hamigrate", 101, "pve3", 2_000, "OK"),
            finished("vzmigrate", 102, "pve1", 1_500, "WARNINGS: 2"),
            // A failed migration left nothing: the guest is still there.
            finished("qmigrate", 103, "pve1", 1_700, "migration aborted"),
            // A running one has not left yet.
            Task {
                endtime: None,
                status: None,
                ..finished("qmigrate", 104, "pve1", 1_800, "OK")
            },
            // The UPID names the node, even when the entry's own field disagrees.
            Task {
                node: Some("elsewhere".into()),
                ..finished("qmigrate", 105, "pve4", 1_900, "OK")
            },
            // Without a UPID, the entry's node.
            Task {
                upid: None,
                ..finished("qmigrate", 106, "pve5", 1_950, "OK")
            },
            // Not a migration.
            finished("qmstart", 107, "pve1", 1_990, "OK"),
        ]);
        let left = |vmid: u32| -> Vec<(String, i64)> {
            ix.departures(vmid)
                .map(|(n, t)| (n.to_owned(), t))
                .collect()
        };
        assert_eq!(
            left(101),
            [("pve2".to_owned(), 1_000), ("pve3".to_owned(), 2_000)]
        );
        assert_eq!(ix.left_at(101, "pve2"), Some(1_000));
        assert_eq!(ix.left_at(101, "pve1"), None);
        assert_eq!(left(102), [("pve1".to_owned(), 1_500)]);
        assert_eq!(left(103), []);
        assert_eq!(left(104), []);
        assert_eq!(left(105), [("pve4".to_owned(), 1_900)]);
        assert_eq!(left(106), [("pve5".to_owned(), 1_950)]);
        assert_eq!(left(107), []);
        // The cooldown still counts the failed one: it tried to move.
        assert_eq!(ix.last_migration(103), Some(1_700));
    }

    #[test]
    fn only_ok_and_warnings_are_success() {
        for (status, ok) in [
            ("OK", true),
            ("WARNINGS: 3", true),
            ("WARNINGS: ", false),
            ("WARNINGS: x", false),
            ("unexpected status", false),
            ("", false),
        ] {
            assert_eq!(succeeded(status), ok, "{status:?}");
        }
    }
}
