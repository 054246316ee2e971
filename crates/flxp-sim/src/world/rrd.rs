//! RRD history: node and guest statistics recorded whenever the world changes and at every
//! simulated minute, folded incrementally into fixed-step archives as Proxmox's rrdcached does
//! (PVE 9 layout: 60 s, 30 min, 6 h and 1 week rows; a 60 s primary data point is the
//! time-weighted average of what held in it, coarser rows average their primary data points and
//! keep their maximum), and the `rrddata` rows Proxmox would return for a time frame (keys without
//! data in a step are left out).

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

/// Recent points kept per series for [`Series::value_at`] (lagging statistics look back a few
/// seconds, never further than a broadcast interval).
const RECENT_POINTS: usize = 64;

/// Seconds of one primary data point (the RRD step of `pve-node-9.0`/`pve-vm-9.0`).
const PDP_STEP: i64 = 60;

/// Archives of the PVE 9 RRD layout (pve-cluster `src/pmxcfs/status.c`): (steps of 60 s per
/// row, rows). Each row holds the average and the maximum of its primary data points; with the
/// layout's xff of 0.5, a row with fewer than half of its points known is unknown.
const ARCHIVES: [(i64, usize); 4] = [(1, 1440), (30, 1440), (360, 1440), (10_080, 570)];

/// One round-robin archive: consecutive rows of `step` seconds, oldest first, plus the row being
/// filled. Values are stored as `f32` (rows × fields × {average, maximum}) to keep long runs of
/// large clusters small; a NaN means no data.
#[derive(Debug, Clone, PartialEq)]
struct Archive {
    step: i64,
    cap: usize,
    fields: usize,
    /// Whether each row holds one primary data point (its average is its maximum).
    single: bool,
    /// End time of the oldest row.
    front_end: i64,
    data: std::collections::VecDeque<f32>,
    /// The row being filled: its end, per-field sums, counts and maxima.
    open_end: i64,
    sum: Vec<f64>,
    count: Vec<u32>,
    max: Vec<f64>,
}

impl Archive {
    fn new(pdps: i64, cap: usize, fields: usize) -> Self {
        Archive {
            step: pdps * PDP_STEP,
            cap,
            fields,
            single: pdps == 1,
            front_end: 0,
            data: std::collections::VecDeque::new(),
            open_end: i64::MIN,
            sum: vec![0.0; fields],
            count: vec![0; fields],
            max: vec![f64::NEG_INFINITY; fields],
        }
    }

    fn stride(&self) -> usize {
        if self.single {
            self.fields
        } else {
            2 * self.fields
        }
    }

    fn rows(&self) -> usize {
        self.data.len() / self.stride().max(1)
    }

    /// Adds the primary data point of the minute ending at `end`.
    fn feed(&mut self, end: i64, pdp: &[f64]) {
        self.feed_n(end, pdp, 1);
    }

    /// Adds `n` equal primary data points, the last of them ending at `end` (all in one row).
    fn feed_n(&mut self, end: i64, pdp: &[f64], n: u32) {
        let row_end = end.div_euclid(self.step) * self.step
            + if end.rem_euclid(self.step) == 0 {
                0
            } else {
                self.step
            };
        if row_end != self.open_end {
            self.close();
            self.open_end = row_end;
        }
        for (f, v) in pdp.iter().enumerate().take(self.fields) {
            if !v.is_nan() && n > 0 {
                self.sum[f] += v * f64::from(n);
                self.count[f] += n;
                self.max[f] = self.max[f].max(*v);
            }
        }
    }

    /// The open row's values (average, maximum) per field.
    fn open_values(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        let pdps = (self.step / PDP_STEP) as f64;
        (0..self.fields).map(move |f| {
            if self.count[f] == 0 || f64::from(self.count[f]) < 0.5 * pdps {
                (f64::NAN, f64::NAN)
            } else {
                (self.sum[f] / f64::from(self.count[f]), self.max[f])
            }
        })
    }

    /// Moves the open row into the archive.
    fn close(&mut self) {
        if self.open_end == i64::MIN {
            return;
        }
        if self.data.is_empty() {
            self.front_end = self.open_end;
        }
        // Grow by 64 rows at a time, exactly: doubling would leave up to half of a full
        // archive unused, on every series of a large cluster.
        let stride = self.stride();
        if self.data.len() + stride > self.data.capacity() {
            let rows = (self.cap + 1).saturating_sub(self.rows()).clamp(1, 64);
            self.data.reserve_exact(rows * stride);
        }
        let values: Vec<(f64, f64)> = self.open_values().collect();
        for (avg, _) in &values {
            self.data.push_back(*avg as f32);
        }
        if !self.single {
            for (_, max) in &values {
                self.data.push_back(*max as f32);
            }
        }
        if self.rows() > self.cap {
            self.data.drain(..stride);
            self.front_end += self.step;
        }
        self.sum.iter_mut().for_each(|v| *v = 0.0);
        self.count.iter_mut().for_each(|v| *v = 0);
        self.max.iter_mut().for_each(|v| *v = f64::NEG_INFINITY);
        self.open_end = i64::MIN;
    }

    /// Field `f` of the row ending at `end`: average or maximum; `None` when there is no such
    /// row, `Some(NaN)` when the row has no data for the field.
    fn get(&self, end: i64, f: usize, max: bool) -> Option<f64> {
        if end == self.open_end {
            return self
                .open_values()
                .nth(f)
                .map(|(a, m)| if max { m } else { a });
        }
        if self.data.is_empty() || end < self.front_end || (end - self.front_end) % self.step != 0 {
            return None;
        }
        let row = ((end - self.front_end) / self.step) as usize;
        if row >= self.rows() {
            return None;
        }
        let offset = if max && !self.single { self.fields } else { 0 };
        self.data
            .get(row * self.stride() + offset + f)
            .map(|v| f64::from(*v))
    }
}

/// One series: the values recorded over time (each holds from its time until the next), folded
/// into fixed-step archives as rrdcached does: the primary data point of a 60 s step is the
/// time-weighted average of what held in it; coarser rows average (and take the maximum of)
/// their primary data points.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The latest points, for [`Series::value_at`].
    recent: std::collections::VecDeque<(f64, Vec<f64>)>,
    /// Values before the first recorded point (a series that reaches back forever).
    backfill: Option<Vec<f64>>,
    /// Time up to which the held values are folded into the archives.
    folded: f64,
    /// The minute being folded: per-field time-weighted sums and covered seconds.
    pdp_sum: Vec<f64>,
    pdp_covered: Vec<f64>,
    archives: Vec<Archive>,
}

impl Default for Series {
    fn default() -> Self {
        Series {
            recent: std::collections::VecDeque::new(),
            backfill: None,
            folded: f64::NEG_INFINITY,
            pdp_sum: Vec::new(),
            pdp_covered: Vec::new(),
            archives: Vec::new(),
        }
    }
}

impl Series {
    fn push(&mut self, at: f64, values: Vec<f64>) {
        if self.archives.is_empty() {
            let n = values.len();
            self.archives = ARCHIVES
                .iter()
                .map(|(pdps, cap)| Archive::new(*pdps, *cap, n))
                .collect();
            self.pdp_sum = vec![0.0; n];
            self.pdp_covered = vec![0.0; n];
            if at == f64::NEG_INFINITY {
                self.backfill = Some(values.clone());
            } else {
                self.folded = at;
            }
        } else {
            self.advance_to(at);
        }
        if let Some((_, last)) = self.recent.back() {
            let same = last.len() == values.len()
                && last
                    .iter()
                    .zip(&values)
                    .all(|(a, b)| a == b || (a.is_nan() && b.is_nan()));
            if same {
                return;
            }
        }
        match self.recent.back_mut() {
            Some((t, v)) if *t == at => *v = values,
            _ => self.recent.push_back((at, values)),
        }
        if self.recent.len() > RECENT_POINTS {
            self.recent.pop_front();
            if let Some(first) = self.recent.front_mut() {
                first.0 = f64::NEG_INFINITY;
            }
        }
    }

    /// Folds the values holding now into the archives up to time `t` (no new point).
    pub fn advance_to(&mut self, t: f64) {
        let Some((_, held)) = self.recent.back() else {
            return;
        };
        if !t.is_finite() {
            return;
        }
        if self.folded == f64::NEG_INFINITY {
            // A series reaching back forever starts folding at the minute it is first seen;
            // the earlier minutes of each archive's first row held its first values.
            let minute = (t / PDP_STEP as f64).floor() as i64 * PDP_STEP;
            self.folded = minute as f64;
            if let Some(first) = &self.backfill {
                for a in &mut self.archives {
                    let row_start = minute.div_euclid(a.step) * a.step;
                    let before = ((minute - row_start) / PDP_STEP) as u32;
                    if before > 0 {
                        a.feed_n(minute, first, before);
                    }
                }
            }
        }
        let mut done: Vec<(i64, Vec<f64>)> = Vec::new();
        while self.folded < t {
            let end = ((self.folded / PDP_STEP as f64).floor() as i64 + 1) * PDP_STEP;
            let seg_end = t.min(end as f64);
            let dt = seg_end - self.folded;
            for (f, v) in held.iter().enumerate() {
                if !v.is_nan() && f < self.pdp_sum.len() {
                    self.pdp_sum[f] += v * dt;
                    self.pdp_covered[f] += dt;
                }
            }
            self.folded = seg_end;
            if seg_end >= end as f64 {
                let pdp = self
                    .pdp_sum
                    .iter()
                    .zip(&self.pdp_covered)
                    .map(|(s, c)| if *c > 0.0 { s / c } else { f64::NAN })
                    .collect();
                done.push((end, pdp));
                self.pdp_sum.iter_mut().for_each(|v| *v = 0.0);
                self.pdp_covered.iter_mut().for_each(|v| *v = 0.0);
            }
        }
        for (end, pdp) in done {
            for a in &mut self.archives {
                a.feed(end, &pdp);
            }
        }
    }

    /// The values holding at time `at` (the last recent point at or before it).
    pub fn value_at(&self, at: f64) -> Option<&[f64]> {
        let i = self.recent.partition_point(|(t, _)| *t <= at);
        match i.checked_sub(1) {
            Some(i) => self.recent.get(i).map(|p| p.1.as_slice()),
            None => self.backfill.as_deref(),
        }
    }

    /// The rows of a time frame ending at `now`, `max` for `cf=MAX`: one per step of the
    /// frame's archive, each from the averages (or maxima) of its primary data points; fields
    /// without data in a step are left out.
    pub fn rows(&self, fields: &[&str], now: f64, frame: Timeframe, max: bool) -> Vec<RrdRow> {
        let (step, count) = frame.resolution();
        let archive = self.archives.iter().find(|a| a.step == step);
        let last = (now.floor() as i64).div_euclid(step) * step;
        let first = last - (count as i64 - 1) * step;
        let earliest = archive.map_or(i64::MAX, |a| {
            if !a.data.is_empty() {
                a.front_end
            } else if a.open_end != i64::MIN {
                a.open_end
            } else {
                i64::MAX
            }
        });
        let mut rows = Vec::with_capacity(count);
        for i in 0..count {
            let end = first + i as i64 * step;
            let mut row = BTreeMap::new();
            row.insert("time".to_string(), end as f64);
            for (f, name) in fields.iter().enumerate() {
                let v = archive.and_then(|a| a.get(end, f, max)).or_else(|| {
                    // Before the first row, a series that reaches back forever shows its
                    // first values.
                    (end < earliest)
                        .then(|| self.backfill.as_ref()?.get(f).copied())
                        .flatten()
                });
                if let Some(v) = v.filter(|v| !v.is_nan()) {
                    row.insert((*name).to_string(), v);
                }
            }
            rows.push(RrdRow(row));
        }
        rows
    }

    /// Bytes held by the archives (for memory checks).
    pub fn archived_values(&self) -> usize {
        self.archives.iter().map(|a| a.data.len()).sum()
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
        let at = if series.archives.is_empty() {
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
        let at = if series.archives.is_empty() {
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

    /// Folds every series up to time `t` (values unchanged).
    pub fn advance_to(&mut self, t: f64) {
        for s in self.nodes.values_mut().chain(self.guests.values_mut()) {
            s.advance_to(t);
        }
    }

    /// Values held by all archives (each 4 bytes), for memory checks.
    pub fn archived_values(&self) -> usize {
        self.nodes
            .values()
            .chain(self.guests.values())
            .map(Series::archived_values)
            .sum()
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
        s.advance_to(719.0);
        let rows = s.rows(&["cpu"], 719.0, Timeframe::Hour, false);
        assert_eq!(rows.len(), 60);
        let last = &rows[59];
        assert_eq!(last.get("time"), Some(660.0));
        assert_eq!(last.get("cpu"), Some(2.0));
        assert_eq!(rows[58].get("cpu"), Some(1.0));
        assert_eq!(rows[0].get("cpu"), Some(1.0), "reaches back forever");
        // A 60 s row holds one primary data point: its maximum is its average (rrdtool).
        let max = s.rows(&["cpu"], 719.0, Timeframe::Hour, true);
        assert_eq!(max[59].get("cpu"), Some(2.0));

        let mut fresh = Series::default();
        fresh.push(650.0, vec![5.0]);
        fresh.advance_to(719.0);
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
    fn coarse_rows_average_their_minutes_and_keep_the_maximum() {
        let mut s = Series::default();
        // One value per minute from 0: 0, 1, 2, ... for two hours.
        for m in 0..120 {
            s.push(f64::from(m) * 60.0, vec![f64::from(m)]);
        }
        s.advance_to(7200.0);
        let week = s.rows(&["v"], 7200.0, Timeframe::Week, false);
        let at = |end: f64| week.iter().find(|r| r.get("time") == Some(end)).cloned();
        // Row (0, 1800] holds the minutes ending at 60..1800, valued 0..29: mean 14.5.
        assert_eq!(at(1800.0).and_then(|r| r.get("v")), Some(14.5));
        assert_eq!(at(3600.0).and_then(|r| r.get("v")), Some(44.5));
        let max = s.rows(&["v"], 7200.0, Timeframe::Week, true);
        let row = max.iter().find(|r| r.get("time") == Some(3600.0)).cloned();
        assert_eq!(row.and_then(|r| r.get("v")), Some(59.0));
    }

    #[test]
    fn a_row_needs_half_its_minutes_and_a_series_from_before_fills_its_first_row() {
        // A guest that appears 10 minutes before a half hour ends: that row is unknown (10 of
        // 30 minutes known, xff 0.5); the next one is not.
        let mut fresh = Series::default();
        fresh.push(1800.0 - 600.0, vec![1.0]);
        fresh.advance_to(3600.0);
        let week = fresh.rows(&["v"], 3600.0, Timeframe::Week, false);
        let at = |rows: &[RrdRow], end: f64| {
            rows.iter()
                .find(|r| r.get("time") == Some(end))
                .and_then(|r| r.get("v"))
        };
        assert_eq!(at(&week, 1800.0), None);
        assert_eq!(at(&week, 3600.0), Some(1.0));

        // A scenario's series reaches back: seen first 20 minutes into a half hour with 1, then
        // 4 from there on, its row averages 20 minutes of 1 and 10 of 4.
        let mut old = Series::default();
        old.push(f64::NEG_INFINITY, vec![1.0]);
        old.push(1200.0, vec![4.0]);
        old.advance_to(1800.0);
        let week = old.rows(&["v"], 1800.0, Timeframe::Week, false);
        assert_eq!(at(&week, 1800.0), Some(2.0));
    }

    #[test]
    fn long_histories_stay_bounded() {
        let mut s = Series::default();
        for i in 0..3000 {
            s.push(f64::from(i) * 60.0, vec![f64::from(i)]);
        }
        assert_eq!(s.recent.len(), RECENT_POINTS);
        assert_eq!(s.archives[0].rows(), 1440, "a day of minutes");
        assert_eq!(s.value_at(2999.5 * 60.0), Some(&[2999.0][..]));
        let hour = s.rows(&["v"], 2999.0 * 60.0, Timeframe::Hour, false);
        assert_eq!(
            hour[59].get("v"),
            Some(2998.0),
            "the minute ending at 2999 min"
        );
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
