//! Reservations: the memory and CPU of VM creations in flight, held in the process between the
//! placement decision and the moment Proxmox shows the new VM running.
//!
//! A decision is made on a snapshot; the VM it places only shows up in `/cluster/resources` after
//! the clone, the configuration and the start, seconds or minutes later. Without a reservation,
//! every decision in that window sees the node as it was and several of them can pick the same
//! last slot. So each decision runs under the zone's lock ([`Reservations::decide`]) on the
//! snapshot's state plus every reservation the snapshot does not reflect yet, and leaves its own
//! reservation behind as a [`Ticket`]. The ticket is dropped when the creation fails (the room is
//! free again at once) and completed when it succeeds; a completed reservation stays until a
//! snapshot shows the VM running (then the snapshot counts it) or, as a fallback for a VM stopped
//! before any snapshot saw it run, until a time-to-live passes.
//!
//! Requests do not all decide on the same snapshot: one may still hold an older snapshot while
//! another has read a newer one that shows the VM. So a reservation is not dropped when a
//! snapshot first shows its VM; it only stops counting for snapshots taken at or after that one,
//! and is forgotten a time-to-live later.
//!
//! This is not state flxp keeps across restarts: it only covers calls in flight in this process,
//! and a restarted process has none.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use flxp_core::{Cluster, Model, Snapshot, State, cluster::Overrides};
use tokio::time::{Duration, Instant};

/// A cluster ready for decisions: the core's [`Model`] built once from a snapshot, and when that
/// snapshot was taken (reservations are judged against it). Derefs to the [`Model`].
#[derive(Debug, Clone)]
pub struct ClusterModel {
    /// The cluster, its rules and its state.
    pub model: Model,
    /// When reading the snapshot began: the cluster is at least as new as this.
    pub taken: Instant,
}

impl ClusterModel {
    /// A model whose snapshot began to be read at `taken`.
    pub fn new(model: Model, taken: Instant) -> Self {
        Self { model, taken }
    }

    /// Builds model, rules and state from a snapshot with the zone's overrides, taken now.
    pub fn from_snapshot(snapshot: &Snapshot, overrides: &Overrides) -> flxp_core::Result<Self> {
        Ok(Self::new(
            Model::from_snapshot(snapshot, overrides)?,
            Instant::now(),
        ))
    }
}

impl std::ops::Deref for ClusterModel {
    type Target = Model;

    fn deref(&self) -> &Model {
        &self.model
    }
}

/// What a decision asks to hold on a node.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeHold {
    /// Node name.
    pub node: String,
    /// Memory in bytes (the VM's full size: a new VM may use all of it).
    pub memory: u64,
    /// vCPUs.
    pub cores: f64,
    /// Disk space it will take on a storage, if any.
    pub disk: Option<DiskHold>,
    /// The hard rule groups the new VM joins: a decision beside it keeps them although the
    /// snapshot does not show the VM yet.
    pub groups: Vec<HeldGroup>,
}

/// A hard rule group a creation in flight joins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldGroup {
    /// The group's tag (`flxp.anti-affinity.web`).
    pub name: String,
    /// Anti-affinity (members apart), else affinity (members together).
    pub apart: bool,
}

/// Disk space a creation in flight will take on a storage.
#[derive(Debug, Clone, PartialEq)]
pub struct DiskHold {
    /// Storage id.
    pub storage: String,
    /// The node whose copy of a local storage it takes; `None` for a shared storage.
    pub node: Option<String>,
    /// Bytes.
    pub bytes: u64,
}

/// What creations in flight that the snapshot does not show yet hold besides memory and CPU:
/// disk space, and the rule groups they join on their nodes.
#[derive(Debug, Clone, Default)]
pub struct Holds {
    disks: BTreeMap<(String, String), u64>,
    groups: Vec<(String, HeldGroup)>,
}

impl Holds {
    /// The nodes creations in flight that join `group` go to.
    pub fn group_nodes<'a>(&'a self, group: &'a HeldGroup) -> impl Iterator<Item = &'a str> {
        self.groups
            .iter()
            .filter(move |(_, g)| g == group)
            .map(|(n, _)| n.as_str())
    }

    /// Bytes held on `storage` as `node` sees it (its own copy, or the shared one).
    pub fn on(&self, storage: &str, node: &str, shared: bool) -> u64 {
        let key = (
            storage.to_owned(),
            if shared {
                String::new()
            } else {
                node.to_owned()
            },
        );
        self.disks.get(&key).copied().unwrap_or(0)
    }
}

#[derive(Debug, Clone)]
struct Entry {
    hold: NodeHold,
    vmid: Option<u32>,
    /// When the creation succeeded; `None` while it is in flight.
    completed: Option<Instant>,
    /// When the earliest snapshot that showed the VM running was taken.
    seen: Option<Instant>,
}

#[derive(Debug, Default)]
struct Book {
    next: u64,
    entries: BTreeMap<u64, Entry>,
}

/// The reservations of one zone, and the lock its placement decisions run under.
#[derive(Debug)]
pub struct Reservations {
    book: Mutex<Book>,
    ttl: Duration,
}

/// One reservation in flight. Dropping it releases the reservation (the creation failed);
/// [`Ticket::complete`] keeps it until Proxmox shows the VM.
#[derive(Debug)]
pub struct Ticket {
    book: Arc<Reservations>,
    id: u64,
    settled: bool,
}

impl Reservations {
    /// An empty book; completed reservations that no snapshot confirms are dropped after `ttl`.
    pub fn new(ttl: Duration) -> Arc<Self> {
        Arc::new(Self {
            book: Mutex::new(Book::default()),
            ttl,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Book> {
        // A panic while holding the lock cannot leave the book half-written (every change is one
        // map operation), so a poisoned lock is still usable.
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reservations held now (in flight and completed but not yet seen).
    pub fn len(&self) -> usize {
        self.lock()
            .entries
            .values()
            .filter(|e| e.seen.is_none())
            .count()
    }

    /// Whether none are held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The VMIDs of creations in flight (cloned, not yet complete nor failed).
    pub fn in_flight_vmids(&self) -> Vec<u32> {
        self.lock()
            .entries
            .values()
            .filter(|e| e.completed.is_none())
            .filter_map(|e| e.vmid)
            .collect()
    }

    /// Adds to `state` (of `cluster`, read from `taken` on) every reservation that `cluster`
    /// does not show yet; forgets expired ones. Returns how many were added. For read-only
    /// decisions.
    pub fn apply(&self, cluster: &Cluster, taken: Instant, state: &mut State) -> usize {
        let mut book = self.lock();
        self.apply_locked(&mut book, cluster, taken, state)
    }

    fn apply_locked(
        &self,
        book: &mut Book,
        cluster: &Cluster,
        taken: Instant,
        state: &mut State,
    ) -> usize {
        let now = Instant::now();
        for e in book.entries.values_mut() {
            if e.vmid.is_some_and(|v| is_running(cluster, v)) {
                e.seen = Some(e.seen.map_or(taken, |s| s.min(taken)));
            }
        }
        let ttl = self.ttl;
        let old = |t: Option<Instant>| t.is_some_and(|t| now.saturating_duration_since(t) >= ttl);
        book.entries
            .retain(|_, e| !(old(e.completed) || old(e.seen)));
        let mut applied = 0;
        for e in book.entries.values() {
            // Shown by a snapshot no older than this one: this one counts it, or it has stopped.
            if e.seen.is_some_and(|s| s <= taken) {
                continue;
            }
            // A node gone from the snapshot cannot be chosen anyway.
            if let Some(idx) = cluster.node_idx(&e.hold.node) {
                state.add_guest(idx, e.hold.memory, e.hold.cores);
                applied += 1;
            }
        }
        applied
    }

    /// Runs one placement decision under the zone's lock: `decide` sees `state` plus every
    /// reservation `cluster` does not show yet, and what it asks to hold is reserved before the
    /// lock is released. Keep `decide` pure and quick: no API calls under the lock.
    pub fn decide<T, E>(
        self: &Arc<Self>,
        cluster: &Cluster,
        taken: Instant,
        state: &State,
        decide: impl FnOnce(&State, &Holds) -> Result<(T, Option<NodeHold>), E>,
    ) -> Result<(T, Option<Ticket>), E> {
        let mut book = self.lock();
        let mut state = state.clone();
        self.apply_locked(&mut book, cluster, taken, &mut state);
        let mut holds = Holds::default();
        for e in book.entries.values() {
            if e.seen.is_some_and(|s| s <= taken) {
                continue;
            }
            if let Some(d) = &e.hold.disk {
                let key = (d.storage.clone(), d.node.clone().unwrap_or_default());
                let held = holds.disks.entry(key).or_default();
                *held = held.saturating_add(d.bytes);
            }
            for g in &e.hold.groups {
                holds.groups.push((e.hold.node.clone(), g.clone()));
            }
        }
        let (value, hold) = decide(&state, &holds)?;
        let ticket = hold.map(|hold| {
            let id = book.next;
            book.next += 1;
            book.entries.insert(
                id,
                Entry {
                    hold,
                    vmid: None,
                    completed: None,
                    seen: None,
                },
            );
            Ticket {
                book: Arc::clone(self),
                id,
                settled: false,
            }
        });
        Ok((value, ticket))
    }
}

fn is_running(cluster: &Cluster, vmid: u32) -> bool {
    cluster
        .guest_idx(vmid)
        .is_some_and(|g| cluster.guest(g).running)
}

impl Ticket {
    /// The node reserved on.
    pub fn node(&self) -> String {
        self.book
            .lock()
            .entries
            .get(&self.id)
            .map(|e| e.hold.node.clone())
            .unwrap_or_default()
    }

    /// Records the VMID the creation got, so a snapshot showing it running ends the reservation.
    pub fn set_vmid(&self, vmid: u32) {
        if let Some(e) = self.book.lock().entries.get_mut(&self.id) {
            e.vmid = Some(vmid);
        }
    }

    /// The creation succeeded: hold the room until a snapshot shows the VM (or the TTL passes).
    pub fn complete(mut self) {
        if let Some(e) = self.book.lock().entries.get_mut(&self.id) {
            e.completed = Some(Instant::now());
        }
        self.settled = true;
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if !self.settled {
            self.book.lock().entries.remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic on malformed fixtures: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use super::*;

    use flxp_core::units::GIB;

    fn cluster(extra: &str) -> Cluster {
        let text = format!(
            r#"[{{"id":"node/a","type":"node","node":"a","status":"online","maxmem":{m},"mem":0,"maxcpu":8}},
                {{"id":"node/b","type":"node","node":"b","status":"online","maxmem":{m},"mem":0,"maxcpu":8}}{extra}]"#,
            m = 16 * GIB
        );
        Cluster::from_json(&text, &Overrides::default()).unwrap()
    }

    fn hold(node: &str, gib: u64) -> Option<NodeHold> {
        Some(NodeHold {
            node: node.into(),
            memory: gib * GIB,
            cores: 2.0,
            disk: None,
            groups: Vec::new(),
        })
    }

    /// VM 200 running on a with 2 of its 4 GiB used, as a resource to add to [`cluster`].
    const RUNNING_200: &str = r#",{"id":"qemu/200","type":"qemu","vmid":200,"node":"a","status":"running","maxmem":4294967296,"mem":2147483648}"#;

    /// Books `hold` in a decision on `c` read at `taken` with an empty state: its ticket.
    fn reserve(
        book: &Arc<Reservations>,
        c: &Cluster,
        taken: Instant,
        hold: Option<NodeHold>,
    ) -> Option<Ticket> {
        let ((), ticket) = book
            .decide(c, taken, &State::new(c), |_, _| Ok::<_, ()>(((), hold)))
            .unwrap();
        ticket
    }

    /// How many reservations a snapshot of `c` read at `taken` still counts.
    fn counted(book: &Reservations, c: &Cluster, taken: Instant) -> usize {
        book.apply(c, taken, &mut State::new(c))
    }

    #[tokio::test(start_paused = true)]
    async fn a_decision_sees_earlier_reservations_until_the_vm_runs() {
        let book = Reservations::new(Duration::from_secs(60));
        let c = cluster("");
        let state = State::new(&c);
        let a = c.node_idx("a").unwrap();
        let t1 = reserve(&book, &c, Instant::now(), hold("a", 4)).unwrap();
        assert_eq!(t1.node(), "a");
        t1.set_vmid(200);
        let (seen, _) = book
            .decide(&c, Instant::now(), &state, |s, _| {
                Ok::<_, ()>((s.usage(a).mem, None))
            })
            .unwrap();
        assert_eq!(seen, 4 * GIB);
        t1.complete();
        // Completed but not yet shown: still counted.
        let mut s = State::new(&c);
        assert_eq!(book.apply(&c, Instant::now(), &mut s), 1);
        assert_eq!(s.usage(a).mem, 4 * GIB);
        assert_eq!(s.usage(a).committed_mem, 4 * GIB);
        // Stopped (a fresh clone) is not yet "shown": its memory is not in the snapshot's state.
        let stopped = cluster(
            r#",{"id":"qemu/200","type":"qemu","vmid":200,"node":"a","status":"stopped","maxmem":4294967296}"#,
        );
        assert_eq!(counted(&book, &stopped, Instant::now()), 1);
        // Running in the snapshot: the snapshot counts it, the reservation ends.
        let running = cluster(RUNNING_200);
        assert_eq!(counted(&book, &running, Instant::now()), 0);
        assert!(book.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_creation_frees_its_room_at_once() {
        let book = Reservations::new(Duration::from_secs(60));
        let c = cluster("");
        let state = State::new(&c);
        let t = reserve(&book, &c, Instant::now(), hold("b", 8));
        assert_eq!(book.len(), 1);
        drop(t);
        assert!(book.is_empty());
        // An error in the decision reserves nothing.
        let r: Result<((), Option<Ticket>), &str> =
            book.decide(&c, Instant::now(), &state, |_, _| Err("bad input"));
        assert!(r.is_err());
        assert!(book.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_completed_reservation_no_snapshot_confirms_expires() {
        let book = Reservations::new(Duration::from_secs(60));
        let c = cluster("");
        reserve(&book, &c, Instant::now(), hold("a", 1))
            .unwrap()
            .complete();
        tokio::time::advance(Duration::from_secs(59)).await;
        assert_eq!(counted(&book, &c, Instant::now()), 1);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(counted(&book, &c, Instant::now()), 0);
        assert!(book.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn in_flight_reservations_never_expire() {
        let book = Reservations::new(Duration::from_secs(1));
        let c = cluster("");
        let t = reserve(&book, &c, Instant::now(), hold("a", 1));
        tokio::time::advance(Duration::from_secs(3600)).await;
        assert_eq!(counted(&book, &c, Instant::now()), 1);
        drop(t);
    }

    #[tokio::test(start_paused = true)]
    async fn a_decision_on_an_older_snapshot_still_sees_a_vm_a_newer_one_showed() {
        // Request A read the cluster before the VM ran; request B read it after and decided
        // first. A must still count the VM, or both could take the last slot.
        let book = Reservations::new(Duration::from_secs(60));
        let empty = cluster("");
        let a = empty.node_idx("a").unwrap();
        let older = Instant::now();
        let t = reserve(&book, &empty, older, hold("a", 4)).unwrap();
        t.set_vmid(200);
        t.complete();
        tokio::time::advance(Duration::from_secs(2)).await;
        let running = cluster(RUNNING_200);
        let newer = Instant::now();
        assert_eq!(counted(&book, &running, newer), 0);
        let mut s = State::new(&empty);
        assert_eq!(
            book.apply(&empty, older, &mut s),
            1,
            "the older snapshot misses it"
        );
        assert_eq!(s.usage(a).mem, 4 * GIB);
        // A snapshot newer than the one that showed it running no longer counts it (stopped).
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(counted(&book, &empty, Instant::now()), 0);
        // It is forgotten a time-to-live after it was first shown.
        tokio::time::advance(Duration::from_secs(60)).await;
        assert_eq!(counted(&book, &empty, older), 0);
    }
}
