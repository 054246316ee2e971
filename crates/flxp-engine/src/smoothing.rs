//! CPU use smoothed over time, so that plans follow a guest's sustained load and not the instant
//! a read happened to catch: a spike of a few minutes neither makes a guest look heavy nor its
//! node overloaded.
//!
//! Each read updates an exponential moving average of every running guest's CPU cores in use,
//! weighed by the cluster time since its last sample (`1 − e^(−Δt/τ)`, τ = `window`), and the
//! snapshot then carries the averages: a guest's `cpu`, and its node's `cpu` moved by the
//! difference between its guests' averages and their instant figures (the host's own use stays
//! instant). Memory stays as read: a node cannot overcommit it, and every step is checked
//! against it. The averages live in memory, like the trigger's hold: a restarted daemon starts
//! again from the instant figures, and no state is kept outside Proxmox.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use flxp_core::Snapshot;

/// The moving averages of one zone; shared by the reads of a daemon across rounds.
#[derive(Debug)]
pub struct Smoother {
    window: f64,
    /// vmid → (average cores in use, cluster time of the last sample).
    seen: Mutex<BTreeMap<u32, (f64, f64)>>,
}

impl Smoother {
    /// Averages over `window` (its time constant); a zero window keeps the instant figures.
    pub fn new(window: Duration) -> Self {
        Self {
            window: window.as_secs_f64(),
            seen: Mutex::new(BTreeMap::new()),
        }
    }

    /// Adds the snapshot's figures at cluster time `now` and puts the averages in their place.
    pub fn apply(&self, snapshot: &mut Snapshot, now: i64) {
        if self.window <= 0.0 {
            return;
        }
        let now = now as f64;
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let mut live = BTreeMap::new();
        // Cores the averages add to (or take from) each node's instant figure.
        let mut shift: BTreeMap<String, f64> = BTreeMap::new();
        for r in snapshot.resources.iter_mut() {
            if !matches!(r.kind.as_deref(), Some("qemu" | "lxc"))
                || r.status.as_deref() != Some("running")
            {
                continue;
            }
            let (Some(vmid), Some(cpu), Some(maxcpu)) = (r.vmid, r.cpu, r.maxcpu) else {
                continue;
            };
            if !(cpu.is_finite() && maxcpu.is_finite() && maxcpu > 0.0) {
                continue;
            }
            let cores = cpu * maxcpu;
            let average = match seen.get(&vmid) {
                Some(&(avg, at)) if now >= at => {
                    let weight = 1.0 - (-(now - at) / self.window).exp();
                    avg + weight * (cores - avg)
                }
                // First seen, or the cluster's clock went back: start from the instant.
                _ => cores,
            };
            live.insert(vmid, (average, now));
            r.cpu = Some(average / maxcpu);
            if let Some(node) = &r.node {
                *shift.entry(node.clone()).or_default() += average - cores;
            }
        }
        // Guests gone or stopped are forgotten: started again, they start from the instant.
        *seen = live;
        drop(seen);
        for r in snapshot.resources.iter_mut() {
            if r.kind.as_deref() != Some("node") {
                continue;
            }
            let (Some(node), Some(cpu), Some(maxcpu)) = (r.node.as_deref(), r.cpu, r.maxcpu) else {
                continue;
            };
            if let Some(d) = shift.get(node).filter(|_| maxcpu > 0.0) {
                r.cpu = Some(((cpu * maxcpu + d) / maxcpu).max(0.0));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic on malformed fixtures: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use flxp_core::snapshot::Resource;

    use super::*;

    fn snapshot(guest_cpu: f64, node_cpu: f64) -> Snapshot {
        Snapshot {
            resources: vec![
                Resource {
                    kind: Some("node".into()),
                    node: Some("pve1".into()),
                    status: Some("online".into()),
                    maxcpu: Some(16.0),
                    cpu: Some(node_cpu),
                    ..Resource::default()
                },
                Resource {
                    kind: Some("qemu".into()),
                    vmid: Some(100),
                    node: Some("pve1".into()),
                    status: Some("running".into()),
                    maxcpu: Some(4.0),
                    cpu: Some(guest_cpu),
                    ..Resource::default()
                },
            ],
            ..Snapshot::default()
        }
    }

    fn cpus(s: &Snapshot) -> (f64, f64) {
        (s.resources[0].cpu.unwrap(), s.resources[1].cpu.unwrap())
    }

    #[test]
    fn a_spike_moves_the_average_by_its_share_of_the_window_and_the_node_with_it() {
        let s = Smoother::new(Duration::from_secs(3600));
        // One core busy on a node whose host uses one more.
        let mut quiet = snapshot(0.25, 2.0 / 16.0);
        s.apply(&mut quiet, 0);
        assert_eq!(cpus(&quiet), (2.0 / 16.0, 0.25));
        // Ten minutes later the guest spikes to all four cores: the average takes 1 − e^(−1/6)
        // (15.4 %) of the three-core rise.
        let mut spike = snapshot(1.0, 5.0 / 16.0);
        s.apply(&mut spike, 600);
        let w = 1.0 - (-600.0f64 / 3600.0).exp();
        let avg = 1.0 + w * 3.0;
        let (node, guest) = cpus(&spike);
        assert!((guest - avg / 4.0).abs() < 1e-12, "{guest}");
        // The host's own core stays; the guest counts with its average.
        assert!((node - (1.0 + avg) / 16.0).abs() < 1e-12, "{node}");
        // A sustained rise is followed: after three windows the average is within 5 %.
        let mut late = snapshot(1.0, 5.0 / 16.0);
        s.apply(&mut late, 600 + 3 * 3600);
        assert!(cpus(&late).1 > 0.95, "{:?}", cpus(&late));
    }

    #[test]
    fn a_zero_window_keeps_the_instant_and_a_clock_going_back_restarts_the_average() {
        let off = Smoother::new(Duration::ZERO);
        let mut s1 = snapshot(1.0, 0.5);
        off.apply(&mut s1, 0);
        assert_eq!(cpus(&s1), (0.5, 1.0));
        let s = Smoother::new(Duration::from_secs(600));
        s.apply(&mut snapshot(0.0, 0.0), 1000);
        let mut back = snapshot(1.0, 0.5);
        s.apply(&mut back, 500);
        assert_eq!(cpus(&back), (0.5, 1.0));
    }
}
