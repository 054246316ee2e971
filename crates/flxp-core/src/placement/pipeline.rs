//! The pipeline: every filter on every node, the policy's scorers on the feasible ones, the pick.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::registry::{self, FILTERS};
use super::{
    Candidate, Ctx, Filter, FilterKind, NodeView, Placement, PlacementOptions, PlacementRequest,
    Policy, Reason, Scorer, Subject,
};
use crate::cluster::{Cluster, NodeIdx};
use crate::constraints::Rules;
use crate::plugin::{PluginKind, PluginSpec, Plugins};
use crate::state::State;
use crate::{Error, Result, Warning};

/// Tolerance for the score contract: normalisation may overshoot 100 by rounding.
const SCORE_SLACK: f64 = 1e-9;

#[derive(Clone)]
pub(super) struct CompiledPolicy {
    policy: Policy,
    scorers: Vec<(&'static dyn Scorer, f64)>,
    /// Score plugins with their weights: consulted by placements, not by the planner.
    pub(super) plugin_scorers: Vec<(PluginSpec, f64)>,
}

/// A score plugin's answer: its name, its weight and its normalised score per node.
pub(super) type PluginScores = (Arc<str>, f64, Vec<f64>);

/// A node, its weighted score and, when asked, each scorer's normalised score.
type Scored<'e> = (NodeIdx, f64, Vec<(&'e str, f64)>);

/// A node with its weighted score, best first when sorted.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranked {
    /// The node.
    pub node: NodeIdx,
    /// Σ weight × score / Σ weight over the scorers that apply, 0..=100.
    pub score: f64,
    /// Each applicable scorer's normalised score.
    pub scores: Vec<(&'static str, f64)>,
}

/// The placement pipeline, built once from options and policies and reused for every decision.
#[derive(Clone)]
pub struct Placer {
    /// The options, with the filters registered besides the built-in ones: every [`Ctx`] made
    /// with them prepares those filters too.
    options: PlacementOptions,
    policies: BTreeMap<String, CompiledPolicy>,
    pub(super) plugins: Plugins,
    pub(super) zone: Option<String>,
}

impl std::fmt::Debug for Placer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Placer")
            .field("options", &self.options)
            .field("policies", &self.policies.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Placer {
    /// Builds the pipeline: built-in policies plus configured ones (a configured policy may
    /// replace a built-in of the same name). The default policy must exist.
    pub fn new(options: PlacementOptions, custom: Vec<Policy>) -> Result<Self> {
        Self::with_plugins(options, custom, Plugins::default())
    }

    /// Like [`Placer::new`], with external plugins: filter plugins join every placement, score
    /// plugins may be named in policies; balance plugins are methods for the balancing method
    /// registry (`Registry::with_plugins`), which the pipeline does not hold.
    pub fn with_plugins(
        options: PlacementOptions,
        custom: Vec<Policy>,
        plugins: Plugins,
    ) -> Result<Self> {
        options.validate()?;
        let mut policies = BTreeMap::new();
        let builtins = Policy::builtin_names()
            .into_iter()
            .filter_map(Policy::builtin);
        for policy in builtins.chain(custom) {
            let mut scorers = Vec::new();
            let mut plugin_scorers = Vec::new();
            for (name, &w) in &policy.weights {
                if w == 0.0 {
                    continue;
                }
                if let Some(spec) = plugins.get(name).filter(|s| s.kind == PluginKind::Score) {
                    plugin_scorers.push((spec.clone(), w));
                    continue;
                }
                let entry = registry::scorer(name).ok_or_else(|| Error::Option {
                    name: format!("policies.{}.{name}", policy.name),
                    message: "unknown scorer".into(),
                })?;
                scorers.push((entry as &dyn Scorer, w));
            }
            policies.insert(
                policy.name.clone(),
                CompiledPolicy {
                    policy,
                    scorers,
                    plugin_scorers,
                },
            );
        }
        let placer = Self {
            options,
            policies,
            plugins,
            zone: None,
        };
        placer.policy(&placer.options.policy)?;
        Ok(placer)
    }

    /// The same pipeline, telling plugins the zone it decides for.
    pub fn in_zone(mut self, zone: Option<String>) -> Self {
        self.zone = zone;
        self
    }

    /// The zone plugins are told, if any.
    pub fn zone(&self) -> Option<&str> {
        self.zone.as_deref()
    }

    /// The configured plugins.
    pub fn plugins(&self) -> &Plugins {
        &self.plugins
    }

    /// The same pipeline, policies, plugins, registered filters and zone with other options
    /// (consolidation's ceiling as reserves).
    pub fn with_options(&self, options: PlacementOptions) -> Result<Self> {
        // The registered filters are part of the pipeline, whatever the options came from.
        let options = PlacementOptions {
            extra_filters: self.options.extra_filters.clone(),
            ..options
        };
        let policies = self.policies.values().map(|p| p.policy.clone()).collect();
        let placer = Self::with_plugins(options, policies, self.plugins.clone())?;
        Ok(placer.in_zone(self.zone.clone()))
    }

    /// The options it was built with.
    pub fn options(&self) -> &PlacementOptions {
        &self.options
    }

    /// Names of the policies it knows.
    pub fn policy_names(&self) -> Vec<&str> {
        self.policies.keys().map(String::as_str).collect()
    }

    /// A policy by name.
    pub fn policy_def(&self, name: &str) -> Result<&Policy> {
        self.policy(name).map(|p| &p.policy)
    }

    pub(super) fn policy(&self, name: &str) -> Result<&CompiledPolicy> {
        self.policies.get(name).ok_or_else(|| Error::Option {
            name: "policy".into(),
            message: format!(
                "unknown policy {name:?}; known: {}",
                self.policy_names().join(", ")
            ),
        })
    }

    /// The same pipeline with one more filter, run after the built-in ones and those registered
    /// before, for every decision and plan it makes: a filter that is not built in is its file
    /// plus this one line. Its name must be new.
    pub fn with_filter(mut self, filter: &'static dyn Filter) -> Result<Self> {
        self.options.extra_filters.push(filter)?;
        Ok(self)
    }

    /// Every filter it runs, in pipeline order: the built-in ones, then the registered ones.
    pub fn filters(&self) -> impl Iterator<Item = &'static dyn Filter> + '_ {
        FILTERS
            .iter()
            .chain(self.options.extra_filters.as_slice())
            .copied()
    }

    /// Whether every filter passes; stops at the first failure (the planner's fast path).
    pub fn feasible(&self, ctx: &Ctx, node: NodeIdx) -> bool {
        let view = ctx.view(node);
        ctx.active_filters()
            .all(|(f, state)| f.passes_with(ctx, state, &view))
    }

    /// Every failed filter on a node, in filter order.
    pub fn failures(&self, ctx: &Ctx, node: NodeIdx) -> Vec<(&'static str, FilterKind, Reason)> {
        let view = ctx.view(node);
        ctx.active_filters()
            .filter_map(|(f, state)| {
                f.check_with(ctx, state, &view)
                    .err()
                    .map(|r| (f.name(), f.kind(), r))
            })
            .collect()
    }

    /// Scores nodes (assumed feasible) under a policy, best first; ties go to the first node by name.
    pub fn rank(
        &self,
        ctx: &Ctx,
        policy: &str,
        nodes: &[NodeIdx],
        breakdown: bool,
    ) -> Result<Vec<Ranked>> {
        let ranked = self.rank_with(ctx, policy, nodes, breakdown, &[])?;
        Ok(ranked
            .into_iter()
            .map(|(node, score, scores)| Ranked {
                node,
                score,
                scores,
            })
            .collect())
    }

    /// [`Placer::rank`] with extra normalised scores per node (score plugins' answers), each with
    /// its name and weight: each node with its total and, when asked, its breakdown.
    pub(super) fn rank_with<'e>(
        &self,
        ctx: &Ctx,
        policy: &str,
        nodes: &[NodeIdx],
        breakdown: bool,
        extra: &'e [PluginScores],
    ) -> Result<Vec<Scored<'e>>> {
        let policy = self.policy(policy)?;
        let mut parts: Vec<Vec<(&'e str, f64)>> =
            vec![Vec::new(); if breakdown { nodes.len() } else { 0 }];
        let totals = self.totals(ctx, policy, nodes, breakdown.then_some(&mut parts), extra)?;
        let mut ranked: Vec<Scored<'e>> = nodes
            .iter()
            .enumerate()
            .map(|(i, &node)| {
                let scores = if breakdown {
                    std::mem::take(&mut parts[i])
                } else {
                    Vec::new()
                };
                (node, totals[i], scores)
            })
            .collect();
        // Nodes are distinct, so the order is total and the same as a stable sort's.
        ranked.sort_by_cached_key(|r| (std::cmp::Reverse(tie_key(r.1)), r.0));
        Ok(ranked)
    }

    /// Weighted totals per node (Σ weight × score / Σ weight over the scorers that apply),
    /// checking the score contract; fills each node's breakdown when asked.
    fn totals<'e>(
        &self,
        ctx: &Ctx,
        policy: &CompiledPolicy,
        nodes: &[NodeIdx],
        mut parts: Option<&mut Vec<Vec<(&'e str, f64)>>>,
        extra: &'e [PluginScores],
    ) -> Result<Vec<f64>> {
        let views: Vec<NodeView> = nodes.iter().map(|&n| ctx.view(n)).collect();
        let mut totals = vec![0.0; views.len()];
        let mut weight_sum = 0.0;
        for (scorer, weight) in &policy.scorers {
            if views.is_empty() || !scorer.applies(ctx) {
                continue;
            }
            let mut raw = scorer.score_all(ctx, &views);
            scorer.normalize(&mut raw);
            for (i, s) in raw.iter().enumerate() {
                if !(-SCORE_SLACK..=100.0 + SCORE_SLACK).contains(s) {
                    return Err(Error::ScoreOutOfRange {
                        scorer: scorer.name(),
                        node: views[i].node.name.clone(),
                        value: *s,
                    });
                }
                totals[i] += weight * s;
                if let Some(parts) = parts.as_deref_mut() {
                    parts[i].push((scorer.name(), *s));
                }
            }
            weight_sum += weight;
        }
        for (name, weight, scores) in extra {
            for (i, s) in scores.iter().enumerate().take(views.len()) {
                totals[i] += weight * s;
                if let Some(parts) = parts.as_deref_mut() {
                    parts[i].push((&**name, *s));
                }
            }
            weight_sum += weight;
        }
        if weight_sum > 0.0 {
            for t in &mut totals {
                *t /= weight_sum;
            }
        }
        Ok(totals)
    }

    /// The best feasible node under a policy (the default when `None`), without explanations.
    pub fn best(&self, ctx: &Ctx, policy: Option<&str>) -> Result<Option<NodeIdx>> {
        // Filter by filter over the nodes still in (the same conjunction as `feasible`): each
        // filter runs in a loop of its own, where its call is predictable, and only on the nodes
        // the earlier ones let through. The subject's own rules go first: a pin, an affinity
        // group or a selector leaves the checks every node needs fewer nodes to look at.
        let mut feasible: Vec<NodeIdx> = ctx.cluster.node_indexes().collect();
        for (f, state) in ctx.active_filters_conditional_first() {
            f.retain(ctx, state, &mut feasible);
        }
        let policy = self.policy(policy.unwrap_or(&self.options.policy))?;
        let totals = self.totals(ctx, policy, &feasible, None, &[])?;
        // Highest total; ties go to the earlier node, which is the first by name.
        let mut best: Option<(NodeIdx, i64)> = None;
        for (&n, &t) in feasible.iter().zip(&totals) {
            let key = tie_key(t);
            if best.is_none_or(|(_, b)| key > b) {
                best = Some((n, key));
            }
        }
        Ok(best.map(|(n, _)| n))
    }

    /// Places a new VM: the whole decision with every node's verdict and scores.
    pub fn place(
        &self,
        cluster: &Cluster,
        rules: &Rules,
        state: &State,
        request: &PlacementRequest,
    ) -> Result<Placement> {
        let policy_name = request.policy.as_deref().unwrap_or(&self.options.policy);
        self.policy(policy_name)?;
        let (subject, mut warnings) = Subject::new_vm(cluster, rules, request)?;
        let ctx = Ctx::new(cluster, rules, state, &self.options, &subject);

        let placement = match &request.host {
            Some(host) => self.place_on_host(&ctx, host, request, &mut warnings)?,
            None => self.place_by_policy(&ctx, policy_name, request, &mut warnings)?,
        };
        let request_warnings = warnings.len();
        warnings.extend(cluster.warnings.iter().cloned());
        warnings.extend(rules.report_warnings());
        Ok(Placement {
            warnings,
            request_warnings,
            ..placement
        })
    }

    fn place_by_policy(
        &self,
        ctx: &Ctx,
        policy: &str,
        request: &PlacementRequest,
        warnings: &mut Vec<Warning>,
    ) -> Result<Placement> {
        let mut infeasible = Vec::new();
        let mut feasible = Vec::new();
        for n in ctx.cluster.node_indexes() {
            let fails = self.failures(ctx, n);
            if fails.is_empty() {
                feasible.push(n);
            } else {
                infeasible.push(Candidate {
                    node: ctx.cluster.node(n).name.clone(),
                    feasible: false,
                    reasons: fails.iter().map(|(f, _, r)| format!("{f}: {r}")).collect(),
                    score: None,
                    scores: BTreeMap::new(),
                    weights: BTreeMap::new(),
                });
            }
        }
        for (n, reasons) in self.plugin_filters(ctx, request, &feasible, warnings)? {
            feasible.retain(|&f| f != n);
            infeasible.push(Candidate {
                node: ctx.cluster.node(n).name.clone(),
                feasible: false,
                reasons,
                score: None,
                scores: BTreeMap::new(),
                weights: BTreeMap::new(),
            });
        }
        // Nodes refused by plugins join the others refused, in name order.
        infeasible.sort_by(|a, b| a.node.cmp(&b.node));
        let extra = self.plugin_scores(ctx, policy, request, &feasible, warnings)?;
        let ranked = self.rank_with(ctx, policy, &feasible, true, &extra)?;
        let node = ranked
            .first()
            .map(|&(n, _, _)| ctx.cluster.node(n).name.clone());
        let weights = &self.policy(policy)?.policy.weights;
        let mut candidates: Vec<Candidate> = ranked
            .into_iter()
            .map(|(n, score, scores)| {
                let scores: BTreeMap<String, f64> = scores
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), round2(v)))
                    .collect();
                Candidate {
                    node: ctx.cluster.node(n).name.clone(),
                    feasible: true,
                    reasons: Vec::new(),
                    score: Some(round2(score)),
                    weights: weights
                        .iter()
                        .filter(|(k, _)| scores.contains_key(*k))
                        .map(|(k, &w)| (k.clone(), w))
                        .collect(),
                    scores,
                }
            })
            .collect();
        candidates.extend(infeasible);
        Ok(Placement {
            node,
            policy: policy.to_owned(),
            candidates,
            warnings: Vec::new(),
            request_warnings: 0,
        })
    }

    fn place_on_host(
        &self,
        ctx: &Ctx,
        host: &str,
        request: &PlacementRequest,
        warnings: &mut Vec<Warning>,
    ) -> Result<Placement> {
        let idx = ctx.cluster.node_idx_loose(host).ok_or_else(|| {
            let names: Vec<&str> = ctx
                .cluster
                .nodes()
                .iter()
                .map(|n| n.name.as_str())
                .collect();
            Error::UnknownHost {
                host: host.to_owned(),
                nodes: names.join(", "),
            }
        })?;
        let name = ctx.cluster.node(idx).name.clone();
        let mut reasons = Vec::new();
        let mut broken = Vec::new();
        for (filter, kind, reason) in self.failures(ctx, idx) {
            if kind == FilterKind::Rule {
                broken.push(format!("{filter}: {reason}"));
            } else {
                reasons.push(format!("{filter}: {reason}"));
            }
        }
        // Plugin filters are rules: a named host that one refuses is a warning, as for tags.
        if reasons.is_empty() {
            for (_, refusals) in self.plugin_filters(ctx, request, &[idx], warnings)? {
                broken.extend(refusals);
            }
        }
        let feasible = reasons.is_empty();
        // Only a VM that does go there breaks the rule; otherwise it is one more reason.
        let outcome = if feasible {
            "placed there because it was named"
        } else {
            "not placed: the host fails the resource checks too"
        };
        for b in broken {
            warnings.push(Warning::about(
                format!("host {name}"),
                format!("breaks a rule ({b}); {outcome}"),
            ));
        }
        Ok(Placement {
            node: feasible.then(|| name.clone()),
            policy: "host".into(),
            candidates: vec![Candidate {
                node: name,
                feasible,
                reasons,
                score: None,
                scores: BTreeMap::new(),
                weights: BTreeMap::new(),
            }],
            warnings: Vec::new(),
            request_warnings: 0,
        })
    }
}

/// A total as compared for ranking: equal to a billionth of a point, so that nodes alike in
/// every figure tie (and go to the first name) even when float sums in another order differ in
/// the last bit.
fn tie_key(score: f64) -> i64 {
    // Totals are checked to lie within 0..=100 (plus slack): far inside i64. `f64::round` is a
    // library call on the baseline x86-64 target, once per node in the fast path; this is the
    // same rounding (half away from zero) from the truncating cast: below 2^53 the fraction
    // `x − trunc(x)` is exact, above it `x` is whole, and the cast saturates like `round`'s.
    let x = score * 1e9;
    let whole = x as i64;
    let frac = x - whole as f64;
    if frac >= 0.5 {
        whole.saturating_add(1)
    } else if frac <= -0.5 {
        whole.saturating_sub(1)
    } else {
        whole
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::tie_key;

    #[test]
    fn tie_key_rounds_exactly_as_f64_round() {
        let mut xs = vec![
            0.0,
            -0.0,
            1e-10,
            4e-10,
            5e-10,
            6e-10,
            -5e-10,
            2.5e-9,
            -2.5e-9,
            0.1 + 0.2,
            33.333_333_333_333_33,
            100.0,
            100.0 + 1e-9,
            -1e-9,
            4_503.599_627_370_496,
            9_007.199_254_740_992,
            9.3e9,
            -9.3e9,
            1e300,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            f64::MIN_POSITIVE,
        ];
        // Every half-way point and its neighbours over a range of magnitudes.
        for e in 0..60 {
            let h = (2f64.powi(e) + 0.5) / 1e9;
            xs.extend([
                h,
                -h,
                h.next_up(),
                h.next_down(),
                -h.next_up(),
                -h.next_down(),
            ]);
        }
        let mut seed: u64 = 7;
        for _ in 0..100_000 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            xs.push((seed >> 11) as f64 / (1u64 << 53) as f64 * 100.0);
        }
        for x in xs {
            assert_eq!(tie_key(x), (x * 1e9).round() as i64, "{x:e}");
        }
    }
}
