//! RRD history: piecewise-constant series of node and guest statistics, recorded whenever the
//! world changes, and the `rrddata` rows Proxmox would return for a time frame (time-weighted
//! averages, or maxima, per step; keys without data in a step are left out).

use std::collections::{BTreeMap, HashMap};

use flxp_core::snapshot::raw::RrdRow;
/// An `rrddata` time frame: the client's type, so both sides agree on names and resolutions.
pub use flxp_pve::types::RrdTimeframe as Timeframe;

/// Node data sources (`pve-node-9.0`), in value order.
pub const NODE_FIELDS: [&str; 19] = [
    "loadavg",
    "maxcpu",
    "cpu",
    "iowait",
    "memtotal",
    "memused",
    "swaptotal",
    "swapused",
    "roottotal",
    "rootused",
    "netin",
    "netout",
    "memavailable",
    "arcsize",
    "pressurecpusome",
    "pressureiosome",
    "pressureiofull",
    "pressurememorysome",
    "pressurememoryfull",
];

/// Guest data sources (`pve-vm-9.0`), in value order; lxc leaves `memhost` and
/// `pressurecpufull` empty.
pub const GUEST_FIELDS: [&str; 17] = [
    "maxcpu",
    "cpu",
    "maxmem",
    "mem",
    "maxdisk",
    "disk",
    "netin",
    "netout",
    "diskread",
    "diskwrite",
    "memhost",
    "pressurecpusome",
    "pressurecpufull",
    "pressureiosome",
    "pressureiofull",
    "pressurememorysome",
    "pressurememoryfull",
];

/// Most points kept per series (memory stays bounded on long runs with many guests); older
/// points are folded into the first kept one, which then reaches back forever.
const MAX_POINTS: usize = 1024;

/// One series: values that hold from each point's time until the next point.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Series {
    points: Vec<(f64, Vec<f64>)>,
}

impl Series {
    fn push(&mut self, at: f64, values: Vec<f64>) {
        if let Some((_, last)) = self.points.last() {
            let same = last.len() == values.len()
                && last
                    .iter()
                    .zip(&values)
                    .all(|(a, b)| a == b || (a.is_nan() && b.is_nan()));
            if same {
                return;
            }
        }
        match self.points.last_mut() {
            Some((t, v)) if *t == at => *v = values,
            _ => self.points.push((at, values)),
        }
        if self.points.len() > MAX_POINTS {
            let excess = self.points.len() - MAX_POINTS;
            self.points.drain(..excess);
            if let Some(first) = self.points.first_mut() {
                first.0 = f64::NEG_INFINITY;
            }
        }
    }

    /// The values holding at time `at` (the last point at or before it).
    pub fn value_at(&self, at: f64) -> Option<&[f64]> {
        let i = self.points.partition_point(|(t, _)| *t <= at);
        i.checked_sub(1).map(|i| self.points[i].1.as_slice())
    }

    /// The rows of a time frame ending at `now`: `cf` is `AVERAGE` or `MAX`.
    pub fn rows(&self, fields: &[&str], now: f64, frame: Timeframe, max: bool) -> Vec<RrdRow> {
        let (step, count) = frame.resolution();
        let last = (now.floor() as i64).div_euclid(step) * step;
        let first = last - (count as i64 - 1) * step;
        let mut rows = Vec::with_capacity(count);
        let mut seg = 0usize;
        for i in 0..count {
            let end = (first + i as i64 * step) as f64;
            let start = end - step as f64;
            while seg + 1 < self.points.len() && self.points[seg + 1].0 <= start {
                seg += 1;
            }
            let mut row = BTreeMap::new();
            row.insert("time".to_string(), end);
            for (f, name) in fields.iter().enumerate() {
                if let Some(v) = self.bucket_value(seg, f, start, end, max) {
                    row.insert((*name).to_string(), v);
                }
            }
            rows.push(RrdRow(row));
        }
        rows
    }

    /// Time-weighted average (or maximum) of field `f` over (start, end].
    fn bucket_value(
        &self,
        first_seg: usize,
        f: usize,
        start: f64,
        end: f64,
        max: bool,
    ) -> Option<f64> {
        let mut weighted = 0.0;
        let mut covered = 0.0;
        let mut best: Option<f64> = None;
        for (k, (t, values)) in self.points.iter().enumerate().skip(first_seg) {
            if *t >= end {
                break;
            }
            let seg_end = self.points.get(k + 1).map_or(f64::INFINITY, |p| p.0);
            let lo = t.max(start);
            let hi = seg_end.min(end);
            if hi <= lo {
                continue;
            }
            let v = values.get(f).copied().unwrap_or(f64::NAN);
            if v.is_nan() {
                continue;
            }
            weighted += v * (hi - lo);
            covered += hi - lo;
            best = Some(best.map_or(v, |b: f64| b.max(v)));
        }
        if covered <= 0.0 {
            return None;
        }
        if max { best } else { Some(weighted / covered) }
    }
}

/// The RRD history of all nodes and guests.
#[derive(Debug, Clone, Default)]
pub struct History {
    nodes: HashMap<String, Series>,
    guests: HashMap<u32, Series>,
}

impl History {
    /// Records a node's values at `at`; the first point of a series reaches back forever (the
    /// cluster existed before the simulation started).
    pub fn push_node(&mut self, node: &str, at: f64, values: Vec<f64>) {
        let series = self.nodes.entry(node.to_string()).or_default();
        let at = if series.points.is_empty() {
            f64::NEG_INFINITY
        } else {
            at
        };
        series.push(at, values);
    }

    /// Records a guest's values at `at`; its first point starts at `created` (which is minus
    /// infinity for guests of the scenario).
    pub fn push_guest(&mut self, vmid: u32, created: f64, at: f64, values: Vec<f64>) {
        let series = self.guests.entry(vmid).or_default();
        let at = if series.points.is_empty() {
            created.min(at)
        } else {
            at
        };
        series.push(at, values);
    }

    /// Forgets a destroyed guest (a new guest with its VMID starts afresh).
    pub fn forget_guest(&mut self, vmid: u32) {
        self.guests.remove(&vmid);
    }

    /// A node's series.
    pub fn node(&self, node: &str) -> Option<&Series> {
        self.nodes.get(node)
    }

    /// A guest's series.
    pub fn guest(&self, vmid: u32) -> Option<&Series> {
        self.guests.get(&vmid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_average_over_each_step_and_omit_missing_data() {
        let mut s = Series::default();
        s.push(f64::NEG_INFINITY, vec![1.0]);
        // Value 3 from t=630 on: the step (600, 660] averages 1 for 30 s and 3 for 30 s.
        s.push(630.0, vec![3.0]);
        let rows = s.rows(&["cpu"], 719.0, Timeframe::Hour, false);
        assert_eq!(rows.len(), 60);
        let last = &rows[59];
        assert_eq!(last.get("time"), Some(660.0));
        assert_eq!(last.get("cpu"), Some(2.0));
        assert_eq!(rows[58].get("cpu"), Some(1.0));
        let max = s.rows(&["cpu"], 719.0, Timeframe::Hour, true);
        assert_eq!(max[59].get("cpu"), Some(3.0));

        let mut fresh = Series::default();
        fresh.push(650.0, vec![5.0]);
        let rows = fresh.rows(&["cpu"], 719.0, Timeframe::Hour, false);
        assert!(
            rows[58].get("cpu").is_none(),
            "no data before the guest existed"
        );
        assert_eq!(rows[59].get("cpu"), Some(5.0));
        assert_eq!(
            serde_json::to_string(&rows[59]).unwrap_or_default(),
            r#"{"cpu":5,"time":660}"#,
            "whole values are written as integers, as Proxmox does"
        );
    }

    #[test]
    fn long_histories_stay_bounded() {
        let mut s = Series::default();
        for i in 0..3000 {
            s.push(f64::from(i), vec![f64::from(i)]);
        }
        assert_eq!(s.points.len(), MAX_POINTS);
        assert_eq!(
            s.value_at(-1e9),
            Some(&[f64::from(3000 - MAX_POINTS as i32)][..])
        );
        assert_eq!(s.value_at(2999.5), Some(&[2999.0][..]));
    }

    #[test]
    fn frames_have_proxmox_resolutions() {
        assert_eq!(
            Timeframe::parse("week").map(Timeframe::resolution),
            Some((1800, 336))
        );
        assert_eq!(
            Timeframe::parse("decade").map(Timeframe::resolution),
            Some((604_800, 570))
        );
        assert_eq!(Timeframe::parse("century"), None);
    }
}
