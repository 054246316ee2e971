//! When to rebalance: a threshold that must be exceeded for a number of consecutive checks, an
//! optional pressure gate, and the gains a plan and each of its moves must bring.
//!
//! Pure: the caller (the daemon) keeps the hold counter between checks and hands it in; the
//! function returns the new one. Semantics follow Proxmox's `load_balance`
//! (docs/proxmox-behaviour.md §2.2): the imbalance must be strictly above the threshold, `hold`
//! consecutive times, and the counter restarts after each decision to act, so two decisions are at
//! least `hold` checks apart.
//!
//! The pressure gate (docs/proxmox-behaviour.md §3) is an AND in front of the imbalance trigger,
//! never a trigger of its own: PSI says a node stalls, not that another node has room or that a
//! move would help. CPU and memory are judged by separate thresholds because `memory full` > 0 is
//! serious even when small while `cpu some` of a few percent is normal on a busy host. It is off by
//! default.

use serde::{Deserialize, Serialize};

use super::measure::{LoadKind, Measure, Metric, balanced_nodes};
use crate::cluster::{Cluster, Node};
use crate::state::State;
use crate::{Error, Result};

/// Pressure thresholds (PSI `avg10`, percent); a node is "under pressure" when any set threshold is
/// reached. All unset (the default) switches the gate off.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct PressureGate {
    /// `pressurecpusome` at or above this.
    pub cpu_some: Option<f64>,
    /// `pressurememorysome` at or above this.
    pub memory_some: Option<f64>,
    /// `pressurememoryfull` at or above this.
    pub memory_full: Option<f64>,
}

impl PressureGate {
    /// Whether any threshold is set.
    pub fn is_enabled(&self) -> bool {
        self.cpu_some.is_some() || self.memory_some.is_some() || self.memory_full.is_some()
    }

    /// The readings of a node that reach their threshold, as `memory full 3.2 ≥ 1`.
    pub fn reached(&self, node: &Node) -> Vec<String> {
        let p = &node.pressure;
        [
            ("cpu some", p.cpu_some, self.cpu_some),
            ("memory some", p.memory_some, self.memory_some),
            ("memory full", p.memory_full, self.memory_full),
        ]
        .into_iter()
        .filter_map(|(name, value, limit)| match (value, limit) {
            (Some(v), Some(l)) if v >= l => Some(format!("{name} {v:.1} ≥ {l}")),
            _ => None,
        })
        .collect()
    }
}

/// The trigger's settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct Trigger {
    /// Act only when the imbalance is strictly above this; `None` takes the measure's default
    /// (10 pp spread, 0.3 CV).
    pub threshold: Option<f64>,
    /// Balance down to this; `None` is half the threshold, so that a balanced cluster does not
    /// trigger again at the next check (hysteresis).
    pub target: Option<f64>,
    /// Consecutive checks above the threshold before acting (Proxmox's hold duration, default 3).
    pub hold: u32,
    /// A plan's balancing moves are kept only if they lower the imbalance by at least this share
    /// of it (Proxmox's margin, default 0.1).
    pub margin: f64,
    /// Each balancing migration must lower the objective Σ(load − mean)² over the balanced nodes by
    /// at least this many squared percentage points (default 1: moving 1 % of a node's capacity
    /// across a gap of 1.5 pp gains 1).
    pub min_gain: f64,
    /// The optional pressure gate.
    pub pressure: PressureGate,
    /// A node whose CPU use is above this share of its CPUs (percent, on the figures the plan
    /// weighs, or on the daemon's last read: [`Trigger::check_with_last_read`]) is overloaded,
    /// and the trigger acts at the first check that finds it instead of waiting out the hold; 0
    /// switches it off.
    pub overload_cpu: f64,
    /// The same for used memory (percent of the node's memory).
    pub overload_memory: f64,
}

impl Default for Trigger {
    fn default() -> Self {
        Self {
            threshold: None,
            target: None,
            hold: 3,
            margin: 0.1,
            min_gain: 1.0,
            pressure: PressureGate::default(),
            overload_cpu: 90.0,
            overload_memory: 95.0,
        }
    }
}

/// The outcome of one check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    /// Whether to plan and carry out a rebalance now.
    pub act: bool,
    /// The hold counter to hand in at the next check.
    pub held: u32,
    /// Why, in words.
    pub reason: String,
}

/// Which figures a plan made on a decision should weigh ([`Trigger::check_with_last_read`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figures {
    /// The smoothed ones, as every check that waited out the hold.
    Averages,
    /// The last read's own: a node is past an overload line there now.
    LastRead,
}

impl Trigger {
    /// The threshold in effect for a measure.
    pub fn threshold_for(&self, measure: Measure) -> f64 {
        self.threshold
            .unwrap_or_else(|| measure.default_threshold())
    }

    /// The target in effect for a measure (never above the threshold).
    pub fn target_for(&self, measure: Measure) -> f64 {
        let threshold = self.threshold_for(measure);
        self.target.unwrap_or(threshold / 2.0).min(threshold)
    }

    /// Checks ranges; the error names the option.
    pub fn validate(&self) -> Result<()> {
        let bad = |name: &str, message: String| {
            Err(Error::Option {
                name: name.into(),
                message,
            })
        };
        for (name, v) in [("threshold", self.threshold), ("target", self.target)] {
            if let Some(v) = v {
                if !v.is_finite() || v < 0.0 {
                    return bad(name, format!("must be a number ≥ 0, got {v}"));
                }
            }
        }
        if !(0.0..1.0).contains(&self.margin) {
            return bad(
                "margin",
                format!("must be a share in 0..1 (0.1 = 10 %), got {}", self.margin),
            );
        }
        for (name, v) in [
            ("overload-cpu", self.overload_cpu),
            ("overload-memory", self.overload_memory),
        ] {
            if !(0.0..=100.0).contains(&v) {
                return bad(
                    name,
                    format!("must be a percentage in 0..=100 (0: off), got {v}"),
                );
            }
        }
        if !self.min_gain.is_finite() || self.min_gain < 0.0 {
            return bad(
                "min-gain",
                format!("must be a number ≥ 0, got {}", self.min_gain),
            );
        }
        for (name, v) in [
            ("pressure.cpu-some", self.pressure.cpu_some),
            ("pressure.memory-some", self.pressure.memory_some),
            ("pressure.memory-full", self.pressure.memory_full),
        ] {
            if let Some(v) = v {
                if !(0.0..=100.0).contains(&v) {
                    return bad(
                        name,
                        format!("must be a PSI percentage in 0..=100, got {v}"),
                    );
                }
            }
        }
        Ok(())
    }

    /// The balanced nodes above an overload line in `state`, as `pve1 (CPU 97 % > 90 %)`.
    pub fn overloaded(&self, cluster: &Cluster, state: &State) -> Vec<String> {
        balanced_nodes(cluster)
            .filter_map(|n| {
                let (node, usage) = (cluster.node(n), state.usage(n));
                let over: Vec<String> = [
                    ("CPU", LoadKind::Cpu, self.overload_cpu),
                    ("memory", LoadKind::Memory, self.overload_memory),
                ]
                .into_iter()
                .filter(|&(_, _, line)| line > 0.0)
                .filter_map(|(name, kind, line)| {
                    let load = kind.load(node, usage);
                    (load > line).then(|| format!("{name} {load:.0} % > {line:.0} %"))
                })
                .collect();
                (!over.is_empty()).then(|| format!("{} ({})", node.name, over.join(", ")))
            })
            .collect()
    }

    /// One check: given the current imbalance and the counter from the previous check, whether to
    /// act now and the counter for the next check. An overloaded node ([`Self::overloaded`])
    /// acts without waiting out the hold: the hold is there to ignore a passing imbalance, and a
    /// node past its capacity on smoothed figures is not passing.
    pub fn check(
        &self,
        cluster: &Cluster,
        state: &State,
        measure: Measure,
        imbalance: f64,
        held: u32,
    ) -> Decision {
        self.decide((cluster, state), (measure, imbalance), held, None)
            .0
    }

    /// [`Self::check`] on smoothed figures, told what the last read itself showed, and which
    /// figures a plan made now should weigh. Averages lag both ways: they still count a spike
    /// that has ended, and they reach a rise that lasts only after a while. So a check counts
    /// towards the hold only while the last read is above the threshold too (a spike over by
    /// the third check moves nothing), and a node above an overload line on the last read acts
    /// at once, planned on that read's figures (a morning's step to 114 % of a node's CPUs
    /// is moved off at the first check, not once the averages have caught up half an hour
    /// later). Judged on the last read, an overload is a node past its capacity now.
    pub fn check_with_last_read(
        &self,
        averaged: (&Cluster, &State),
        last: (&Cluster, &State),
        measure: Measure,
        metric: Metric,
        held: u32,
    ) -> (Decision, Figures) {
        let imbalance = super::measure::imbalance(averaged.0, averaged.1, measure, metric);
        let now = super::measure::imbalance(last.0, last.1, measure, metric);
        self.decide(
            averaged,
            (measure, imbalance),
            held,
            Some((last.0, last.1, now)),
        )
    }

    /// The check on the figures `at`, the imbalance they show under `measure`, the counter so
    /// far and, when known, what the last read showed.
    fn decide(
        &self,
        (cluster, state): (&Cluster, &State),
        (measure, imbalance): (Measure, f64),
        held: u32,
        last: Option<(&Cluster, &State, f64)>,
    ) -> (Decision, Figures) {
        let threshold = self.threshold_for(measure);
        let hot_now = match last {
            Some((c, s, now)) if now > threshold => self.overloaded(c, s),
            _ => Vec::new(),
        };
        if !hot_now.is_empty() {
            let (_, _, now) = last.unwrap_or((cluster, state, imbalance));
            let above = format!(
                "{} {} on the last read ({} on the averages) is above the threshold {}",
                measure.as_str(),
                measure.fmt(now),
                measure.fmt(imbalance),
                measure.fmt(threshold)
            );
            let more = format!(", and overloaded on the last read: {}", hot_now.join("; "));
            return (
                self.gated(cluster, held.saturating_add(1), above, more),
                Figures::LastRead,
            );
        }
        if imbalance <= threshold {
            return (
                Decision {
                    act: false,
                    held: 0,
                    reason: format!(
                        "{} {} is within the threshold {}",
                        measure.as_str(),
                        measure.fmt(imbalance),
                        measure.fmt(threshold)
                    ),
                },
                Figures::Averages,
            );
        }
        if let Some((_, _, now)) = last.filter(|&(_, _, now)| now <= threshold) {
            return (
                Decision {
                    act: false,
                    held: 0,
                    reason: format!(
                        "{} {} on the averages is above the threshold {}, but {} on the last \
                         read: passing",
                        measure.as_str(),
                        measure.fmt(imbalance),
                        measure.fmt(threshold),
                        measure.fmt(now)
                    ),
                },
                Figures::Averages,
            );
        }
        let held = held.saturating_add(1);
        let hot = if held < self.hold {
            self.overloaded(cluster, state)
        } else {
            Vec::new()
        };
        if held < self.hold && hot.is_empty() {
            return (
                Decision {
                    act: false,
                    held,
                    reason: format!(
                        "{} {} is above the threshold {} for {held} of {} checks",
                        measure.as_str(),
                        measure.fmt(imbalance),
                        measure.fmt(threshold),
                        self.hold
                    ),
                },
                Figures::Averages,
            );
        }
        let overload = if hot.is_empty() {
            String::new()
        } else {
            format!(", and overloaded: {}", hot.join("; "))
        };
        let above = format!(
            "{} {} is above the threshold {}",
            measure.as_str(),
            measure.fmt(imbalance),
            measure.fmt(threshold)
        );
        (
            self.gated(cluster, held, above, overload),
            Figures::Averages,
        )
    }

    /// Acts unless the pressure gate is on and no node is under pressure. `above` says what is
    /// above the threshold, `more` what else the decision rests on (an overload); `held` is the
    /// count of checks that agreed, kept when the gate holds back.
    fn gated(&self, cluster: &Cluster, held: u32, above: String, more: String) -> Decision {
        if self.pressure.is_enabled() {
            let pressed: Vec<String> = cluster
                .nodes()
                .iter()
                .filter(|n| n.is_schedulable())
                .filter_map(|n| {
                    let r = self.pressure.reached(n);
                    (!r.is_empty()).then(|| format!("{} ({})", n.name, r.join(", ")))
                })
                .collect();
            if pressed.is_empty() {
                // The imbalance persists: keep counting, so that pressure arriving later acts at once.
                return Decision {
                    act: false,
                    held,
                    reason: format!("{above}, but no node is under pressure"),
                };
            }
            return Decision {
                act: true,
                held: 0,
                reason: format!(
                    "{above} for {held} check(s), and under pressure: {}",
                    pressed.join("; ")
                ),
            };
        }
        Decision {
            act: true,
            held: 0,
            reason: format!("{above} for {held} check(s){more}"),
        }
    }

    /// Whether lowering the imbalance from `before` to `after` is worth migrating for: the relative
    /// change reaches the margin (Proxmox: `(imbalance − target) / imbalance ≥ margin`).
    pub fn worth(&self, before: f64, after: f64) -> bool {
        before > 0.0 && (before - after) / before >= self.margin
    }

    /// Whether one migration's gain of the objective (squared pp) is enough.
    pub fn gain_ok(&self, gain: f64) -> bool {
        gain >= self.min_gain && gain > 0.0
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::testutil::*;

    fn cluster() -> Cluster {
        ClusterBuilder::new()
            .node(
                node("a")
                    .rrd("pressurememoryfull", 2.5)
                    .rrd("pressurecpusome", 30.0),
            )
            .node(node("b").rrd("pressurememoryfull", 0.0))
            .node(
                node("c")
                    .notes("flxp.maintenance")
                    .rrd("pressurememoryfull", 50.0),
            )
            .build()
    }

    #[test]
    fn an_overloaded_node_acts_at_the_first_check_above_the_threshold() {
        // a: 15.2 of 16 CPUs busy (95 %); b: idle. Memory even.
        let c = ClusterBuilder::new()
            .node(node("a"))
            .node(node("b"))
            .guest(vm(100, "a").mem(8 * GIB, 8 * GIB).cores(16.0, 0.95))
            .guest(vm(101, "b").mem(8 * GIB, 8 * GIB).cores(1.0, 0.0))
            .build();
        let s = State::new(&c);
        let t = Trigger::default();
        assert_eq!(t.overloaded(&c, &s), ["a (CPU 95 % > 90 %)"]);
        let d = t.check(&c, &s, Measure::Spread, 95.0, 0);
        assert_eq!((d.act, d.held), (true, 0), "{}", d.reason);
        assert!(
            d.reason
                .ends_with("for 1 check(s), and overloaded: a (CPU 95 % > 90 %)"),
            "{}",
            d.reason
        );
        // Within the threshold an overloaded node alone does not act: nothing would help.
        assert!(!t.check(&c, &s, Measure::Spread, 5.0, 0).act);
        // Above the line only: at 95 % a line of 96 waits out the hold; 0 switches it off.
        for line in [96.0, 0.0] {
            let t = Trigger {
                overload_cpu: line,
                ..Trigger::default()
            };
            assert!(t.overloaded(&c, &s).is_empty());
            assert_eq!(t.check(&c, &s, Measure::Spread, 95.0, 0).held, 1);
        }
        let bad = Trigger {
            overload_memory: 101.0,
            ..Trigger::default()
        };
        assert!(
            bad.validate()
                .unwrap_err()
                .to_string()
                .contains("overload-memory")
        );
    }

    /// Nodes a and b (16 CPUs, 64 GiB), 8 GiB used on each; a's guest uses `cpu_a` of its 16
    /// cores, b's nothing.
    fn busy_a(cpu_a: f64) -> Cluster {
        ClusterBuilder::new()
            .node(node("a"))
            .node(node("b"))
            .guest(vm(100, "a").mem(8 * GIB, 8 * GIB).cores(16.0, cpu_a))
            .guest(vm(101, "b").mem(8 * GIB, 8 * GIB).cores(1.0, 0.0))
            .build()
    }

    /// One check of `t` whose averages show a's guest at `averaged` of its cores and whose last
    /// read shows it at `last` ([`busy_a`]), the metric `dominant`.
    fn judge(t: &Trigger, averaged: f64, last: f64, held: u32) -> (Decision, Figures) {
        let (a, l) = (busy_a(averaged), busy_a(last));
        let (sa, sl) = (State::new(&a), State::new(&l));
        t.check_with_last_read(
            (&a, &sa),
            (&l, &sl),
            Measure::Spread,
            Metric::Dominant,
            held,
        )
    }

    #[test]
    fn a_spike_over_by_the_last_read_does_not_count_towards_the_hold() {
        // The averages still see a at 60 % of its CPUs (busy: the spread of the larger share,
        // 60 − 12.5); the last read sees it back at 30 %, where memory alone is weighed (even).
        let t = Trigger::default();
        let (over, figures) = judge(&t, 0.6, 0.3, 2);
        assert_eq!(
            (over.act, over.held, figures),
            (false, 0, Figures::Averages)
        );
        assert_eq!(
            over.reason,
            "spread 47.5 pp on the averages is above the threshold 10.0 pp, but 0.0 pp on the \
             last read: passing"
        );
        // The same third check while the last read agrees acts, on the averages.
        let (on, figures) = judge(&t, 0.6, 0.6, 2);
        assert_eq!((on.act, on.held, figures), (true, 0, Figures::Averages));
        assert_eq!(
            on.reason,
            "spread 47.5 pp is above the threshold 10.0 pp for 3 check(s)"
        );
    }

    #[test]
    fn a_node_overloaded_on_the_last_read_acts_at_once_on_that_reads_figures() {
        // A step from 30 % to 95 % of a's CPUs: the averages have not caught up (memory alone,
        // even), the last read shows a past the 90 % line.
        let t = Trigger::default();
        let before = busy_a(0.3);
        assert!(
            !t.check(&before, &State::new(&before), Measure::Spread, 0.0, 0)
                .act,
            "the averages alone wait"
        );
        let (hot, figures) = judge(&t, 0.3, 0.95, 0);
        assert_eq!((hot.act, hot.held, figures), (true, 0, Figures::LastRead));
        assert_eq!(
            hot.reason,
            "spread 82.5 pp on the last read (0.0 pp on the averages) is above the threshold \
             10.0 pp for 1 check(s), and overloaded on the last read: a (CPU 95 % > 90 %)"
        );
        // Off (0), the line leaves the step to the hold on the averages.
        let off = Trigger {
            overload_cpu: 0.0,
            ..t
        };
        let (wait, _) = judge(&off, 0.3, 0.95, 0);
        assert_eq!((wait.act, wait.held), (false, 0), "{}", wait.reason);
    }

    #[test]
    fn acts_after_hold_consecutive_checks_strictly_above_the_threshold_and_restarts() {
        let c = cluster();
        let t = Trigger::default();
        let m = Measure::Spread;
        let d = t.check(&c, &State::new(&c), m, 10.0, 0);
        assert_eq!(
            (d.act, d.held),
            (false, 0),
            "equal to the threshold is not above it"
        );
        let d1 = t.check(&c, &State::new(&c), m, 12.0, 0);
        let d2 = t.check(&c, &State::new(&c), m, 11.0, d1.held);
        let d3 = t.check(&c, &State::new(&c), m, 15.0, d2.held);
        assert_eq!((d1.act, d1.held, d2.act, d2.held), (false, 1, false, 2));
        assert_eq!((d3.act, d3.held), (true, 0), "{}", d3.reason);
        assert_eq!(
            t.check(&c, &State::new(&c), m, 9.0, 2).held,
            0,
            "dropping below resets"
        );
        let now = Trigger { hold: 0, ..t };
        assert!(
            now.check(&c, &State::new(&c), m, 10.5, 0).act,
            "hold 0 acts at once"
        );
    }

    #[test]
    fn pressure_gate_is_an_and_over_balanced_nodes_with_separate_thresholds() {
        let c = cluster();
        let gated = Trigger {
            hold: 1,
            pressure: PressureGate {
                memory_full: Some(5.0),
                ..PressureGate::default()
            },
            ..Trigger::default()
        };
        let d = gated.check(&c, &State::new(&c), Measure::Spread, 20.0, 0);
        assert!(
            !d.act,
            "c is under pressure but in maintenance: {}",
            d.reason
        );
        assert_eq!(d.held, 1, "the imbalance still counts");
        assert!(
            !gated
                .check(&c, &State::new(&c), Measure::Spread, 5.0, 0)
                .act,
            "never the only trigger"
        );
        let cpu = Trigger {
            pressure: PressureGate {
                cpu_some: Some(25.0),
                ..PressureGate::default()
            },
            ..gated
        };
        let d = cpu.check(&c, &State::new(&c), Measure::Spread, 20.0, 0);
        assert!(d.act);
        assert!(d.reason.contains("a (cpu some 30.0 ≥ 25)"), "{}", d.reason);
    }

    #[test]
    fn margin_is_relative_and_gain_absolute() {
        let t = Trigger::default();
        assert!(t.worth(20.0, 18.0));
        assert!(!t.worth(20.0, 18.5));
        assert!(!t.worth(0.0, 0.0));
        assert!(t.gain_ok(1.0) && !t.gain_ok(0.99));
        assert!(
            !Trigger { min_gain: 0.0, ..t }.gain_ok(0.0),
            "a move must gain something"
        );
    }

    #[test]
    fn defaults_follow_the_measure_and_the_target_is_half_the_threshold() {
        let t = Trigger::default();
        assert_eq!(t.threshold_for(Measure::Spread), 10.0);
        assert_eq!(t.target_for(Measure::Spread), 5.0);
        assert_eq!(t.threshold_for(Measure::Cv), 0.3);
        let t = Trigger {
            threshold: Some(8.0),
            target: Some(20.0),
            ..t
        };
        assert_eq!(
            t.target_for(Measure::Spread),
            8.0,
            "never above the threshold"
        );
    }

    #[test]
    fn bad_settings_are_named() {
        let e = Trigger {
            margin: 10.0,
            ..Trigger::default()
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(e.contains("margin") && e.contains("0.1 = 10 %"), "{e}");
        let e = Trigger {
            pressure: PressureGate {
                memory_some: Some(200.0),
                ..PressureGate::default()
            },
            ..Trigger::default()
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(e.contains("pressure.memory-some"), "{e}");
        assert!(Trigger::default().validate().is_ok());
    }
}
