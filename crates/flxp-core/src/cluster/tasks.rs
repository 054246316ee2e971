//! What the task history says about guests: migrations in flight, recent ones, guests starting.
//!
//! This is how flxp stays stateless: cooldowns and "already moving" are read from Proxmox's
//! `/cluster/tasks`, never remembered.

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
    starting: BTreeSet<u32>,
    last_migration: BTreeMap<u32, i64>,
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
                }
                if let Some(time) = time {
                    let e = ix.last_migration.entry(vmid).or_insert(time);
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

    /// The newest task time seen, a stand-in for "now" when the snapshot has no time.
    pub fn newest_time(&self) -> Option<i64> {
        self.newest
    }
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
}
