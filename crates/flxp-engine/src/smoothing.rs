//! CPU use smoothed over time, so that plans follow a guest's sustained load and not the instant
//! a read happened to catch: a spike of a few minutes neither makes a guest look heavy nor its
//! node overloaded.
//!
//! Each read updates an exponential moving average of every running guest's CPU cores in use,
//! weighed by the cluster time since its last sample (`1 − e^(−Δt/τ)`, τ = `window`). A guest's
//! figure is that average, or the least it used at every read of the last `window` when that is
//! more: a rise that lasted a whole window is a level, taken at its height at once, where the
//! average alone would still be catching up for another two windows (a fall is followed by the
//! average only, so a guest that just quietened still counts as busy for a while). The
//! snapshot then carries these figures: a guest's `cpu`, and its node's `cpu` moved by the
//! difference between its guests' averages and their instant figures (the host's own use stays
//! instant). Memory stays as read: a node cannot overcommit it, and every step is checked
//! against it. The averages live in memory, like the trigger's hold: a restarted daemon starts
//! again from the instant figures, and no state is kept outside Proxmox.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use flxp_core::Snapshot;

/// The moving averages of one zone; shared by the reads of a daemon across rounds.
#[derive(Debug)]
pub struct Smoother {
    window: f64,
    /// vmid → what its reads left.
    seen: Mutex<BTreeMap<u32, Seen>>,
}

/// One guest's CPU history as the averages need it.
#[derive(Debug, Clone)]
struct Seen {
    /// Average cores in use.
    average: f64,
    /// Cluster time of the last sample.
    at: f64,
    /// The samples of the last window, oldest first, and the last one before it: (time, cores).
    recent: VecDeque<(f64, f64)>,
}

impl Seen {
    /// The least the guest used at every read since `now − window`, once the reads reach back
    /// that far (a sample at or before the window's start is kept for exactly that).
    fn sustained(&self, now: f64, window: f64) -> Option<f64> {
        let (first, _) = *self.recent.front()?;
        (first <= now - window).then(|| {
            self.recent
                .iter()
                .map(|&(_, cores)| cores)
                .fold(f64::INFINITY, f64::min)
        })
    }
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
            let mut next = match seen.remove(&vmid) {
                Some(mut s) if now >= s.at => {
                    let weight = 1.0 - (-(now - s.at) / self.window).exp();
                    s.average += weight * (cores - s.average);
                    s.at = now;
                    s.recent.push_back((now, cores));
                    // Keep one sample at or before the window's start, none older.
                    while s
                        .recent
                        .get(1)
                        .is_some_and(|&(t, _)| t <= now - self.window)
                    {
                        s.recent.pop_front();
                    }
                    s
                }
                // First seen, or the cluster's clock went back: start from the instant.
                _ => Seen {
                    average: cores,
                    at: now,
                    recent: VecDeque::from([(now, cores)]),
                },
            };
            let figure = next
                .sustained(now, self.window)
                .map_or(next.average, |level| level.max(next.average));
            // A level is where the average restarts from, so that the fall after it is
            // followed as gradually as any other.
            next.average = figure;
            live.insert(vmid, next);
            r.cpu = Some(figure / maxcpu);
            if let Some(node) = &r.node {
                *shift.entry(node.clone()).or_default() += figure - cores;
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
    fn a_rise_that_lasted_a_window_counts_at_its_height_a_shorter_one_does_not() {
        let s = Smoother::new(Duration::from_secs(1800));
        // Reads every 10 minutes; the guest uses 1 of its 4 cores, then all 4 from t = 600.
        let read = |cpu: f64, t: i64| {
            let mut snap = snapshot(cpu, cpu * 4.0 / 16.0);
            s.apply(&mut snap, t);
            cpus(&snap).1 * 4.0
        };
        assert_eq!(read(0.25, 0), 1.0);
        let w = 1.0 - (-600.0f64 / 1800.0).exp();
        let mut average = 1.0;
        for t in [600, 1200, 1800] {
            average += w * (4.0 - average);
            let got = read(1.0, t);
            assert!((got - average).abs() < 1e-12, "t={t}: {got} ≠ {average}");
        }
        // At t = 2400 every read since 600 (a whole window back) saw 4 cores: a level.
        assert_eq!(read(1.0, 2400), 4.0);
        // The fall is followed by the average from the level, not at once.
        let fallen = read(0.25, 3000);
        assert!((fallen - (4.0 + w * (1.0 - 4.0))).abs() < 1e-12, "{fallen}");
        // A 20-minute spike never counts at its height.
        let s2 = Smoother::new(Duration::from_secs(1800));
        let mut peak: f64 = 0.0;
        for (t, cpu) in [
            (0, 0.25),
            (600, 1.0),
            (1200, 1.0),
            (1800, 0.25),
            (2400, 0.25),
        ] {
            let mut snap = snapshot(cpu, cpu * 4.0 / 16.0);
            s2.apply(&mut snap, t);
            peak = peak.max(cpus(&snap).1 * 4.0);
        }
        assert!(peak < 3.0, "{peak}");
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
