//! Options of the planner and of evacuation.

use serde::{Deserialize, Serialize};

use super::measure::{Measure, Metric};
use super::methods::{MethodError, MethodName, Registry};
use super::trigger::Trigger;
use crate::cluster::MaintenanceSource;
use crate::{Error, Result};

/// What the planner may do and how it judges balance.
pub type BalanceOptions = BalanceOptionsOf<MethodName>;

/// [`BalanceOptions`] as read from a file: the method's name not yet checked (see
/// [`RawBalanceOptions::resolve`]).
pub type RawBalanceOptions = BalanceOptionsOf<String>;

/// What the planner may do and how it judges balance, with the method held as `M`: a
/// [`MethodName`] checked against a registry ([`BalanceOptions`]), or the name as written
/// ([`RawBalanceOptions`]), for a config whose methods are known only once its plugins are read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct BalanceOptionsOf<M> {
    /// How moves are chosen: a registered method's name (`flxp` by default).
    pub method: M,
    /// How imbalance is summed up (spread by default).
    pub measure: Measure,
    /// The resource spread is taken of (memory by default).
    pub metric: Metric,
    /// Threshold, target, margin, minimum gain, hold count and pressure gate.
    pub trigger: Trigger,
    /// Most migrations in one plan, rule fixes included (`--max-migrations`).
    pub max_migrations: usize,
    /// A guest migrated less than this many seconds before the snapshot is not moved to balance
    /// (read from the task history; rule fixes and evacuation ignore it).
    pub cooldown_secs: i64,
    /// A balancing move never takes a guest back to a node it left (by a successful migration,
    /// read from the task history) less than this many seconds before the snapshot, so guests do
    /// not ping-pong between two nodes; 0 switches it off. Rule fixes and evacuation may return
    /// a guest (their reason says so).
    pub return_hold_secs: i64,
    /// Try swapping two guests when no single move helps.
    pub swaps: bool,
    /// Search width: the most loaded and least loaded nodes considered per step as sources and
    /// targets (all nodes when the cluster has fewer).
    pub candidate_nodes: usize,
    /// For a guest that must move but fits nowhere, move up to this many other guests off a node
    /// that could then take it (0 disables).
    pub make_room: usize,
    /// What one migration costs, in GiB copied: moves are ranked by their gain over (migrations +
    /// GiB copied / this), so a large guest must gain more than a small one to be moved. The
    /// default 4 is about the fixed cost of a live migration at 10 Gb/s; 0 ranks by gain per
    /// migration alone (fewest migrations, more bytes).
    pub move_cost_gib: f64,
    /// Move running containers by restarting them (`restart=1`: LXC cannot live-migrate); off by
    /// default, so balancing and rule fixes leave running containers where they are. Evacuation
    /// always restarts them: the node must be emptied.
    pub restart_containers: bool,
    /// What the `pve-*` methods balance on: the usage mode of the cluster's `crs` option by
    /// default, or static / dynamic usage when set (`--usage`).
    pub usage: UsageChoice,
    /// After the greedy search, drop balancing moves the result does not need (on by default).
    pub prune: bool,
    /// Thorough mode: seconds to spend searching for a plan reaching the same imbalance with fewer
    /// migrations and bytes (`--effort`; 0, the default, plans once, fast and deterministic).
    pub effort_secs: f64,
    /// What one soft rule (preferred node, soft affinity or anti-affinity, `prefer-no` taint) is
    /// worth in imbalance (`--soft-weight`, in the measure's unit: percentage points of spread,
    /// or CV): a balancing move may leave N more soft rules of its guest unmet when it lowers the
    /// measure by at least N × this. 0 ignores soft rules in balancing; unset (the default),
    /// balancing never leaves a soft rule worse off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub soft_weight: Option<f64>,
    /// How much of the best move's balance gain per migration (a fraction from 0 to 1) the
    /// greedy search may give up to place configured vCPUs more evenly over the nodes' cores:
    /// among the moves within it, the one evening out vCPUs per core most runs, and no later
    /// pass may leave them less even. What guests use is what is balanced;
    /// their configured size is the ceiling of what they may take, which a quiet hour does not
    /// show. 0 switches it off; it never makes the trigger act.
    pub vcpu_tolerance: f64,
}

/// What Proxmox's balancing methods take as a node's load (docs: Proxmox's `crs: ha=`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum UsageChoice {
    /// As the cluster's `crs` option says: static for `ha=static`, else dynamic.
    #[default]
    Auto,
    /// Configured CPUs and memory of the guests (`ha=static`); measurements unused.
    Static,
    /// Measured CPU and memory (`ha=dynamic`).
    Dynamic,
}

impl UsageChoice {
    /// Every choice, in the order help lists them; names derive from [`Self::as_str`].
    pub const ALL: [Self; 3] = [Self::Auto, Self::Static, Self::Dynamic];

    /// The name used in options (the serde name too).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Static => "static",
            Self::Dynamic => "dynamic",
        }
    }

    /// Parses the name used in options.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|u| u.as_str() == name)
    }
}

impl Default for BalanceOptions {
    fn default() -> Self {
        RawBalanceOptions::default().with_method(MethodName::default())
    }
}

impl RawBalanceOptions {
    /// The same options with the method checked against `registry`; the error names the
    /// method and the registry's names.
    pub fn resolve(self, registry: &Registry) -> std::result::Result<BalanceOptions, MethodError> {
        let method = registry.parse(&self.method)?;
        Ok(self.with_method(method))
    }
}

impl Default for RawBalanceOptions {
    fn default() -> Self {
        Self {
            method: MethodName::default().as_str().to_owned(),
            measure: Measure::Spread,
            metric: Metric::Dominant,
            trigger: Trigger::default(),
            max_migrations: 20,
            cooldown_secs: 1800,
            return_hold_secs: 21_600,
            swaps: true,
            candidate_nodes: 16,
            make_room: 2,
            move_cost_gib: 4.0,
            restart_containers: false,
            usage: UsageChoice::Auto,
            prune: true,
            effort_secs: 0.0,
            soft_weight: None,
            vcpu_tolerance: 0.0,
        }
    }
}

impl<M> BalanceOptionsOf<M> {
    /// The same options with `method` as the method.
    fn with_method<N>(self, method: N) -> BalanceOptionsOf<N> {
        /// Moves every other field over; each is named once, and the pattern has no `..`, so a
        /// new option fails to compile until it is listed here.
        macro_rules! carry {
            ($($field:ident),* $(,)?) => {{
                let Self { method: _, $($field),* } = self;
                BalanceOptionsOf { method, $($field),* }
            }};
        }
        carry!(
            measure,
            metric,
            trigger,
            max_migrations,
            cooldown_secs,
            return_hold_secs,
            swaps,
            candidate_nodes,
            make_room,
            move_cost_gib,
            restart_containers,
            usage,
            prune,
            effort_secs,
            soft_weight,
            vcpu_tolerance,
        )
    }

    /// Checks ranges; the error names the option.
    pub fn validate(&self) -> Result<()> {
        self.trigger.validate()?;
        if self.cooldown_secs < 0 {
            return Err(Error::Option {
                name: "cooldown-secs".into(),
                message: format!("must be ≥ 0 seconds, got {}", self.cooldown_secs),
            });
        }
        if self.return_hold_secs < 0 {
            return Err(Error::Option {
                name: "return-hold-secs".into(),
                message: format!(
                    "must be ≥ 0 seconds (0 switches it off), got {}",
                    self.return_hold_secs
                ),
            });
        }
        if !self.move_cost_gib.is_finite() || self.move_cost_gib < 0.0 {
            return Err(Error::Option {
                name: "move-cost-gib".into(),
                message: format!("must be a number of GiB ≥ 0, got {}", self.move_cost_gib),
            });
        }
        if !self.effort_secs.is_finite() || !(0.0..=86_400.0).contains(&self.effort_secs) {
            return Err(Error::Option {
                name: "effort-secs".into(),
                message: format!(
                    "must be a number of seconds from 0 to 86400, got {}",
                    self.effort_secs
                ),
            });
        }
        if let Some(w) = self.soft_weight.filter(|w| !w.is_finite() || *w < 0.0) {
            return Err(Error::Option {
                name: "soft-weight".into(),
                message: format!("must be a number ≥ 0, got {w}"),
            });
        }
        if !(0.0..=1.0).contains(&self.vcpu_tolerance) {
            return Err(Error::Option {
                name: "vcpu-tolerance".into(),
                message: format!(
                    "must be a fraction from 0 to 1 (0 switches it off), got {}",
                    self.vcpu_tolerance
                ),
            });
        }
        if self.candidate_nodes < 2 {
            return Err(Error::Option {
                name: "candidate-nodes".into(),
                message: format!(
                    "must be at least 2 (one source, one target), got {}",
                    self.candidate_nodes
                ),
            });
        }
        Ok(())
    }
}

/// What evacuation may do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct EvacuateOptions {
    /// Most migrations into one node per wave; `0` puts everything in one wave.
    pub max_inflow_per_node: u32,
    /// Move stopped guests too (offline migration), so the node can be switched off.
    pub include_stopped: bool,
    /// How the imbalance before and after is reported.
    pub measure: Measure,
    /// The resource spread is taken of.
    pub metric: Metric,
    /// The placement policy that picks each guest's target; `least-loaded` spreads guests so the
    /// nodes' load shares even out instead of filling the biggest node first.
    pub policy: String,
    /// Whether the guests an evacuation took off a node go back to it once its maintenance ends
    /// (`flxp maintenance NODE --off`, a rolling maintenance), as Proxmox's HA does.
    pub return_home: bool,
    /// What the nodes named are emptied as: in maintenance as requested, or freed by a
    /// consolidation (whose plan then says so, and counts no rule broken by its guests).
    #[serde(skip)]
    pub emptied_as: MaintenanceSource,
    /// Leave the plan's [`Bounds`](super::Bounds) unknown: for plans only judged or listed, such
    /// as a rolling maintenance's schedule of every node, where on a large cluster computing the
    /// bounds costs most of the plan.
    #[serde(skip)]
    pub skip_bounds: bool,
}

impl Default for EvacuateOptions {
    fn default() -> Self {
        Self {
            max_inflow_per_node: 2,
            include_stopped: true,
            measure: Measure::Spread,
            metric: Metric::Memory,
            policy: "least-loaded".into(),
            return_home: true,
            emptied_as: MaintenanceSource::Requested,
            skip_bounds: false,
        }
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::balance::methods::{flxp, pve_bruteforce, pve_topsis};

    #[test]
    fn options_read_from_kebab_case_and_refuse_unknown_keys() {
        let o: BalanceOptions = serde_json::from_str(
            r#"{"method":"pve-topsis","measure":"cv","max-migrations":3,"trigger":{"threshold":0.2}}"#,
        )
        .unwrap();
        assert_eq!(o.method, pve_topsis::NAME);
        assert_eq!(o.trigger.threshold, Some(0.2));
        assert_eq!(o.trigger.hold, 3);
        assert!(serde_json::from_str::<BalanceOptions>(r#"{"max-moves":3}"#).is_err());
        for m in [flxp::NAME, pve_bruteforce::NAME, pve_topsis::NAME] {
            assert_eq!(MethodName::parse(m.as_str()), Ok(m));
        }
    }

    #[test]
    fn an_unknown_method_is_named_with_the_known_ones() {
        let e = serde_json::from_str::<BalanceOptions>(r#"{"method":"fastest"}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(
                r#"unknown balancing method "fastest" (known: flxp, pve-bruteforce, pve-topsis)"#
            ),
            "{e}"
        );
        let o = BalanceOptions {
            method: pve_bruteforce::NAME,
            ..BalanceOptions::default()
        };
        assert_eq!(
            serde_json::to_value(&o).unwrap()["method"],
            "pve-bruteforce"
        );
    }

    #[test]
    fn raw_options_read_any_name_and_resolve_it_against_a_registry() {
        use crate::plugin::{OnFailure, PluginKind, PluginSpec};
        let raw: RawBalanceOptions =
            serde_json::from_str(r#"{"method":"rec","max-migrations":3}"#).unwrap();
        assert_eq!(raw.method, "rec");
        let e = raw.clone().resolve(Registry::builtin()).unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"unknown balancing method "rec" (known: flxp, pve-bruteforce, pve-topsis)"#
        );
        let spec = PluginSpec::new("rec", PluginKind::Balance, OnFailure::Fail);
        let registry = Registry::builtin().with_specs([&spec]).unwrap();
        let o = raw.resolve(&registry).unwrap();
        assert_eq!(o.method, "rec");
        assert_eq!(o.max_migrations, 3);
        assert_eq!(
            RawBalanceOptions::default()
                .resolve(Registry::builtin())
                .unwrap(),
            BalanceOptions::default()
        );
    }

    #[test]
    fn bad_values_are_named() {
        let e = BalanceOptions {
            candidate_nodes: 1,
            ..BalanceOptions::default()
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(e.contains("candidate-nodes"), "{e}");
        let e = serde_json::from_str::<BalanceOptions>(r#"{"return-hold-secs":-1}"#)
            .unwrap()
            .validate()
            .unwrap_err()
            .to_string();
        assert!(e.contains("return-hold-secs"), "{e}");
        let e = serde_json::from_str::<BalanceOptions>(r#"{"vcpu-tolerance":1.5}"#)
            .unwrap()
            .validate()
            .unwrap_err()
            .to_string();
        assert!(e.contains("vcpu-tolerance"), "{e}");
        assert_eq!(BalanceOptions::default().vcpu_tolerance, 0.0);
        assert_eq!(BalanceOptions::default().return_hold_secs, 21_600);
        assert!(BalanceOptions::default().validate().is_ok());
    }
}
