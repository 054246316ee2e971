//! Filter and score plugins in a placement: one call per plugin with all candidates, the answer
//! checked, and the plugin's failure policy applied (decide without it and warn, or refuse).

use std::sync::Arc;

use crate::cluster::NodeIdx;
use crate::plugin::{
    self, CallError, OnFailure, PROTOCOL_VERSION, PluginKind, PluginSpec, Request,
};
use crate::{Error, Result, Warning};

use super::normalize::by_max;
use super::pipeline::{Placer, PluginScores};
use super::{Ctx, PlacementRequest};

impl Placer {
    /// The request a plugin of `kind` gets for these candidates.
    fn plugin_request(
        &self,
        ctx: &Ctx,
        spec: &PluginSpec,
        request: &PlacementRequest,
        nodes: &[NodeIdx],
    ) -> Request {
        Request {
            protocol: PROTOCOL_VERSION,
            kind: spec.kind,
            plugin: spec.name.to_string(),
            zone: self.zone.clone(),
            guest: Some(super::new_vm_figures(request)),
            nodes: nodes
                .iter()
                .map(|&n| super::node_figures(ctx.cluster, ctx.state, ctx.options, n))
                .collect(),
            guests: None,
        }
    }

    /// Every filter plugin on the candidates, in config order (each sees the nodes the earlier
    /// ones allowed): the refused nodes, each with `plugin: reason` lines.
    pub(super) fn plugin_filters(
        &self,
        ctx: &Ctx,
        request: &PlacementRequest,
        nodes: &[NodeIdx],
        warnings: &mut Vec<Warning>,
    ) -> Result<Vec<(NodeIdx, Vec<String>)>> {
        let mut left: Vec<NodeIdx> = nodes.to_vec();
        let mut refused: Vec<(NodeIdx, Vec<String>)> = Vec::new();
        for spec in self.plugins.of_kind(PluginKind::Filter) {
            if left.is_empty() {
                break;
            }
            let req = self.plugin_request(ctx, spec, request, &left);
            let answer = self
                .plugins
                .call(spec, &req)
                .and_then(|b| plugin::parse_filter(&b, &req));
            let verdicts = match answer {
                Ok(v) => v,
                Err(e) => {
                    self.plugins.failed(spec, &e);
                    failed(spec, e, warnings)?;
                    continue;
                }
            };
            left.retain(|&n| {
                let name = &ctx.cluster.node(n).name;
                match verdicts.get(name) {
                    Some(Some(reason)) => {
                        refused.push((n, vec![format!("{}: {reason}", spec.name)]));
                        false
                    }
                    _ => true,
                }
            });
        }
        refused.sort_by_key(|(n, _)| *n);
        Ok(refused)
    }

    /// Every score plugin the policy names, normalised to 0..=100 like built-in scorers, with its
    /// weight; a failed one, or one that scores every node the same, is left out (its weight
    /// too); a failed one with `on-failure = "fail"` refuses the decision.
    pub(super) fn plugin_scores(
        &self,
        ctx: &Ctx,
        policy: &str,
        request: &PlacementRequest,
        nodes: &[NodeIdx],
        warnings: &mut Vec<Warning>,
    ) -> Result<Vec<PluginScores>> {
        let mut out = Vec::new();
        if nodes.is_empty() {
            return Ok(out);
        }
        for (spec, weight) in &self.policy(policy)?.plugin_scorers {
            let req = self.plugin_request(ctx, spec, request, nodes);
            let answer = self
                .plugins
                .call(spec, &req)
                .and_then(|b| plugin::parse_score(&b, &req));
            match answer {
                Ok(scores) => {
                    let mut raw: Vec<f64> = nodes
                        .iter()
                        .map(|&n| {
                            scores
                                .get(&ctx.cluster.node(n).name)
                                .copied()
                                .unwrap_or(0.0)
                        })
                        .collect();
                    // The same score everywhere says nothing: left out of the mean (weight too),
                    // so that it does not dilute the scorers that do rank the nodes.
                    if raw.iter().all(|s| *s == raw[0]) {
                        continue;
                    }
                    by_max(&mut raw);
                    out.push((Arc::clone(&spec.name), *weight, raw));
                }
                Err(e) => {
                    self.plugins.failed(spec, &e);
                    failed(spec, e, warnings)?;
                }
            }
        }
        Ok(out)
    }
}

/// Applies a plugin's failure policy: a warning and on, or the decision's error.
fn failed(spec: &PluginSpec, e: CallError, warnings: &mut Vec<Warning>) -> Result<()> {
    match spec.on_failure {
        OnFailure::Fail => Err(Error::Plugin {
            plugin: spec.name.to_string(),
            message: e.to_string(),
        }),
        OnFailure::Ignore => {
            warnings.push(Warning::about(
                format!("plugin {}", spec.name),
                format!("{e}; decided without it (on-failure = \"ignore\")"),
            ));
            Ok(())
        }
    }
}
