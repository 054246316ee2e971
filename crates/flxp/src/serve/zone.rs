//! One zone as the service holds it: its metered API, the VM creator with the zone's
//! reservations, and fresh cluster models shared between requests that arrive together.
//!
//! flxp keeps no state about the cluster: every decision reads a snapshot taken after the request
//! arrived. One collection runs at a time per zone; requests that arrive while it runs wait for
//! the next one, which starts as soon as it ends, and all of them share it. So a burst of requests
//! costs two snapshot times at most and a few snapshots in all, not one each, and no request
//! decides on a cluster older than itself. Collections run in their own task: a client that hangs
//! up does not cancel one that others wait for.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use flxp_core::Overrides;
use flxp_engine::smoothing::Smoother;
use flxp_engine::{ClusterModel, Creator};
use flxp_pve::Pve;
use tokio::sync::watch;
use tokio::time::{Duration, Instant};

use super::metered::{Contact, SharedContact};

/// Why a zone's cluster could not be read.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct ReadError(pub String);

/// A finished collection: its generation and what it read.
type Collected = Option<(u64, Result<Arc<ClusterModel>, ReadError>)>;

/// Which collections started, and whether one runs.
#[derive(Debug, Default)]
struct Generations {
    /// The generation of the last collection started.
    started: u64,
    /// Whether a collection runs now.
    running: bool,
    /// Whether a request waits for a collection after the running one.
    wanted: bool,
}

/// One Proxmox cluster served by `flxp serve`.
pub struct Zone {
    /// Its name in the config.
    pub name: String,
    /// Its API (metered).
    pub api: Pve,
    /// Node overrides from the config.
    pub overrides: Overrides,
    /// Creates VMs; holds the zone's reservations.
    pub creator: Creator,
    contact: SharedContact,
    /// Held while an API rebalance or evacuation runs in the zone: one at a time.
    pub runs: Arc<tokio::sync::Mutex<()>>,
    /// Nodes an evacuation started here is emptying, with how many evacuations name each.
    evacuating: Arc<Mutex<BTreeMap<String, usize>>>,
    generations: Mutex<Generations>,
    collected: watch::Sender<Collected>,
    /// The daemon's CPU averages of this zone, when it runs the zone: models are built on them,
    /// so a new VM is placed on the figures the rounds balance on.
    smoother: std::sync::OnceLock<Arc<Smoother>>,
}

impl std::fmt::Debug for Zone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Zone").field("name", &self.name).finish()
    }
}

impl Zone {
    /// A zone; `contact` is the clock its metered API sets.
    pub fn new(
        name: &str,
        api: Pve,
        overrides: Overrides,
        creator: Creator,
        contact: SharedContact,
    ) -> Self {
        Self {
            name: name.to_owned(),
            api,
            overrides,
            creator,
            contact,
            runs: Arc::default(),
            evacuating: Arc::default(),
            generations: Mutex::new(Generations::default()),
            collected: watch::Sender::new(None),
            smoother: std::sync::OnceLock::new(),
        }
    }

    /// Builds this zone's models on the daemon's CPU averages from now on (set once; a later
    /// call is ignored).
    pub fn smooth_with(&self, smoother: Arc<Smoother>) {
        let _ = self.smoother.set(smoother);
    }

    /// Marks `nodes` as being emptied until the mark is dropped: models read meanwhile treat them
    /// as in maintenance, so no new VM is placed there while guests leave.
    pub fn evacuating(&self, nodes: &[String]) -> EvacuationMark {
        let mut m = self.evacuating.lock().unwrap_or_else(|p| p.into_inner());
        for n in nodes {
            *m.entry(n.clone()).or_default() += 1;
        }
        EvacuationMark {
            book: Arc::clone(&self.evacuating),
            nodes: nodes.to_vec(),
        }
    }

    /// A model of the cluster from a snapshot taken after this call began.
    pub async fn model(self: &Arc<Self>) -> Result<Arc<ClusterModel>, ReadError> {
        let mut rx = self.collected.subscribe();
        let (target, start) = {
            let mut g = self.generations.lock().unwrap_or_else(|p| p.into_inner());
            if g.running {
                // The running collection may have read the cluster before this call: wait for
                // the next one.
                g.wanted = true;
                (g.started + 1, false)
            } else {
                g.started += 1;
                g.running = true;
                (g.started, true)
            }
        };
        if start {
            tokio::spawn(Arc::clone(self).collect(target));
        }
        let done = rx
            .wait_for(|c| c.as_ref().is_some_and(|(g, _)| *g >= target))
            .await
            .map_err(|_| {
                ReadError(format!(
                    "zone {}: the snapshot collector stopped",
                    self.name
                ))
            })?;
        match done.as_ref() {
            Some((_, result)) => result.clone(),
            None => Err(ReadError(format!("zone {}: no snapshot", self.name))),
        }
    }

    /// Collects generation after generation while requests wait for a newer one.
    async fn collect(self: Arc<Self>, mut generation: u64) {
        loop {
            let result = self.read().await;
            self.collected.send_replace(Some((generation, result)));
            let mut g = self.generations.lock().unwrap_or_else(|p| p.into_inner());
            if g.wanted {
                g.wanted = false;
                g.started += 1;
                generation = g.started;
            } else {
                g.running = false;
                return;
            }
        }
    }

    async fn read(&self) -> Result<Arc<ClusterModel>, ReadError> {
        let taken = tokio::time::Instant::now();
        let now = flxp_engine::epoch_now();
        let mut snapshot = flxp_engine::collect_snapshot(&self.api, now)
            .await
            .map_err(|e| {
                ReadError(format!(
                    "cannot read zone {}: {}",
                    self.name,
                    flxp_engine::error_chain(&e)
                ))
            })?;
        let smoother = self.smoother.get().cloned();
        let mut overrides = self.overrides.clone();
        overrides.maintenance.extend(
            self.evacuating
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .keys()
                .cloned(),
        );
        // Building the model is CPU work (100+ ms at a thousand nodes): off the async workers.
        let built = flxp_engine::blocking::run("building the cluster model", move || {
            if let Some(s) = smoother {
                // In the cluster's clock, as the daemon's reads are.
                let at = snapshot.time.unwrap_or(now);
                s.apply(&mut snapshot, at);
            }
            flxp_core::Model::from_snapshot(&snapshot, &overrides)
                .map(|model| ClusterModel::new(model, taken))
        })
        .await
        .map_err(|e| ReadError(format!("zone {}: {e}", self.name)))?;
        built
            .map(Arc::new)
            .map_err(|e| ReadError(format!("zone {}: {e}", self.name)))
    }

    /// Whether Proxmox answered within `window` and no call has failed to reach it since.
    pub fn answered_within(&self, window: Duration) -> bool {
        self.contact().reachable_within(window)
    }

    /// When Proxmox last answered.
    pub fn last_answer(&self) -> Option<Instant> {
        self.contact().last_answer
    }

    /// When Proxmox last answered and last could not be reached.
    pub fn contact(&self) -> Contact {
        *self.contact.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Nodes marked as being emptied; dropping it lifts the mark.
#[derive(Debug)]
pub struct EvacuationMark {
    book: Arc<Mutex<BTreeMap<String, usize>>>,
    nodes: Vec<String>,
}

impl Drop for EvacuationMark {
    fn drop(&mut self) {
        let mut m = self.book.lock().unwrap_or_else(|p| p.into_inner());
        for n in &self.nodes {
            if let Some(c) = m.get_mut(n) {
                *c -= 1;
                if *c == 0 {
                    m.remove(n);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may panic

    use flxp_core::placement::{PlacementOptions, Placer};
    use flxp_engine::Reservations;
    use flxp_engine::create_vm::CreateOptions;
    use flxp_pve::fake::FakeApi;

    use super::*;

    fn zone(fake: Arc<FakeApi>) -> Arc<Zone> {
        let placer = Arc::new(Placer::new(PlacementOptions::default(), vec![]).unwrap());
        let creator = Creator::new(
            fake.erase(),
            placer,
            Reservations::new(Duration::from_secs(60)),
            CreateOptions::default(),
        );
        Arc::new(Zone::new(
            "lab",
            fake.erase(),
            Overrides::default(),
            creator,
            SharedContact::default(),
        ))
    }

    fn resources_calls(fake: &FakeApi) -> usize {
        fake.calls()
            .iter()
            .filter(|c| *c == "GET /cluster/resources")
            .count()
    }

    #[tokio::test(start_paused = true)]
    async fn requests_that_arrive_together_share_two_snapshots_at_most() {
        let snapshot = flxp_sim::Scenario::demo().snapshot;
        let fake = Arc::new(FakeApi::new(snapshot).with_latency(Duration::from_millis(100)));
        let z = zone(Arc::clone(&fake));
        // The first call starts a collection; the nine arriving while it runs share the next.
        let first = {
            let z = Arc::clone(&z);
            tokio::spawn(async move { z.model().await })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        let rest: Vec<_> = (0..9)
            .map(|_| {
                let z = Arc::clone(&z);
                tokio::spawn(async move { z.model().await })
            })
            .collect();
        let a = first.await.unwrap().unwrap();
        let mut others = Vec::new();
        for r in rest {
            others.push(r.await.unwrap().unwrap());
        }
        assert_eq!(resources_calls(&fake), 2);
        assert!(others.iter().all(|m| Arc::ptr_eq(m, &others[0])));
        assert!(
            !Arc::ptr_eq(&a, &others[0]),
            "later requests never get the older snapshot"
        );
        assert_eq!(a.cluster.nodes().len(), 4);
        // A call after all of them reads the cluster again.
        z.model().await.unwrap();
        assert_eq!(resources_calls(&fake), 3);
    }

    #[tokio::test]
    async fn a_zone_the_daemon_runs_is_modelled_on_the_daemons_cpu_averages() {
        let snapshot = flxp_sim::Scenario::demo().snapshot;
        let busy = snapshot
            .resources
            .iter()
            .find(|r| r.kind.as_deref() == Some("qemu") && r.cpu.is_some_and(|c| c > 0.05))
            .cloned()
            .unwrap();
        let vmid = busy.vmid.unwrap();
        let fake = Arc::new(FakeApi::new(snapshot.clone()));
        let instant = zone(Arc::clone(&fake)).model().await.unwrap();
        let cpu_of = |m: &ClusterModel| {
            let c = &m.cluster;
            c.guest(c.guest_idx(vmid).unwrap()).cpu
        };
        // The daemon saw the guest idle a minute ago: a 30-minute average has barely moved.
        let smoother = Arc::new(Smoother::new(Duration::from_secs(1800)));
        let mut idle = snapshot;
        for r in idle.resources.iter_mut().filter(|r| r.vmid == Some(vmid)) {
            r.cpu = Some(0.0);
        }
        smoother.apply(&mut idle, flxp_engine::epoch_now() - 60);
        let z = zone(fake);
        z.smooth_with(smoother);
        let smoothed = z.model().await.unwrap();
        assert!(cpu_of(&instant) > 0.0);
        assert!(
            cpu_of(&smoothed) < cpu_of(&instant) * 0.1,
            "{} vs {}",
            cpu_of(&smoothed),
            cpu_of(&instant)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_unreadable_zone_is_an_error_naming_it() {
        let fake = Arc::new(FakeApi::new(flxp_sim::Scenario::demo().snapshot).fail(
            "GET /cluster/resources",
            503,
            "Service Unavailable",
        ));
        let e = zone(fake).model().await.unwrap_err();
        assert!(e.0.starts_with("cannot read zone lab: "), "{e}");
    }
}
