//! A balance plugin as a method: one call per round, then every proposed migration checked on the
//! state the earlier accepted ones leave, with flxp's own movability rules, budget and placement
//! filters (capacity, hard rules). A refused proposal is not planned: it is listed in the plan's
//! `skipped` (or its warnings, for a guest that does not exist) with the reason.

use crate::cluster::{Cluster, NodeIdx};
use crate::plugin::{self, OnFailure, PROTOCOL_VERSION, PluginKind, Proposal, Request};
use crate::{Error, Result, Warning};

use super::super::draft::Draft;
use super::super::movable::Intent;
use super::super::options::BalanceOptions;
use super::super::plan::{Plan, Purpose};
use super::super::planner::finish;
use super::{BalanceMethod, PlanInput};

/// A configured balance plugin, registered under its name.
pub struct PluginMethod {
    /// The plugin's name.
    pub name: &'static str,
}

impl BalanceMethod for PluginMethod {
    fn name(&self) -> &'static str {
        self.name
    }

    fn description(&self) -> &'static str {
        "a balance plugin from the config: its proposals, each checked by flxp"
    }

    fn plan(&self, input: &PlanInput<'_>, options: &BalanceOptions) -> Result<Plan> {
        let PlanInput {
            cluster,
            rules,
            state,
            placer,
        } = *input;
        let plugins = placer.plugins();
        let spec = plugins
            .get(self.name)
            .filter(|s| s.kind == PluginKind::Balance)
            .ok_or_else(|| Error::Option {
                name: "method".into(),
                message: format!("{} is not a configured balance plugin", self.name),
            })?;
        let measure = options.measure;
        let mut sim = Draft::new(
            cluster,
            rules,
            placer,
            state,
            measure.load_kind(options.metric),
            measure,
            options.cooldown_secs,
            options.max_migrations,
        );
        sim.restart_containers = options.restart_containers;
        let request = Request {
            protocol: PROTOCOL_VERSION,
            kind: PluginKind::Balance,
            plugin: spec.name.to_owned(),
            zone: placer.zone().map(str::to_owned),
            guest: None,
            nodes: cluster
                .node_indexes()
                .map(|n| plugin::node_figures(cluster, state, placer.options(), n))
                .collect(),
            guests: Some(
                cluster
                    .guest_indexes()
                    .map(|g| plugin::guest_figures(cluster, state, g))
                    .collect(),
            ),
        };
        let answer = plugins
            .call(spec, &request)
            .and_then(|b| plugin::parse_balance(&b));
        let (mut accepted, mut refused) = (0, 0);
        match answer {
            Err(e) if spec.on_failure == OnFailure::Fail => {
                return Err(Error::Plugin {
                    plugin: spec.name.to_owned(),
                    message: e.to_string(),
                });
            }
            Err(e) => sim.warnings.push(Warning::about(
                format!("plugin {}", spec.name),
                format!("{e}; planned no migration (on-failure = \"ignore\")"),
            )),
            Ok(proposals) => {
                for p in &proposals {
                    match step(&mut sim, spec.name, p) {
                        Ok(()) => accepted += 1,
                        Err(why) => {
                            refused += 1;
                            refuse(&mut sim, spec.name, p, &why);
                        }
                    }
                }
            }
        }
        let threshold = options.trigger.threshold_for(measure);
        let target = options.trigger.target_for(measure);
        let mut plan = finish(sim, state, self.name, options.metric, threshold, target);
        for (i, m) in plan.migrations.iter_mut().enumerate() {
            m.wave = i as u32;
        }
        plan.summary = format!(
            "plugin {}: {accepted} proposed migration(s) accepted, {refused} refused as unsafe; {} {} → {}",
            self.name,
            measure.as_str(),
            measure.fmt(plan.imbalance_before),
            measure.fmt(plan.imbalance_after),
        );
        Ok(plan)
    }
}

/// Checks one proposal on the draft's state and applies it, or says why not.
fn step(sim: &mut Draft, plugin: &str, p: &Proposal) -> std::result::Result<(), String> {
    let cluster: &Cluster = sim.cluster;
    let g = cluster
        .guest_idx(p.vmid)
        .ok_or_else(|| format!("guest {} is not in the zone", p.vmid))?;
    let to: NodeIdx = cluster
        .node_idx(&p.target)
        .ok_or_else(|| format!("node {:?} is not in the zone", p.target))?;
    if sim.has_moved(g) {
        return Err("it moves in this plan already".into());
    }
    let unit = sim.units.of(g);
    let members = sim.units.get(unit).members.clone();
    if members.iter().all(|&m| sim.state.location(m) == to) {
        return Err(format!("it is on {} already", p.target));
    }
    if let Some((m, stay)) = sim.unit_stays(unit, Intent::Balance) {
        return Err(if m == g {
            stay.to_string()
        } else {
            format!("its group member {}: {stay}", cluster.guest(m).vmid)
        });
    }
    if sim.unit_moved(unit) {
        return Err("a member of its group moves in this plan already".into());
    }
    let moving = members
        .iter()
        .filter(|&&m| sim.state.location(m) != to)
        .count();
    if moving > sim.budget_left() {
        return Err(format!(
            "beyond the migration budget of {} (raise --max-migrations)",
            sim.budget
        ));
    }
    let group = sim.units.get(unit).group.clone();
    let subject = sim.subject(&members, group.as_deref());
    let ctx = crate::placement::Ctx::new(
        cluster,
        sim.rules,
        &sim.state,
        sim.placer.options(),
        &subject,
    );
    let fails = sim.placer.failures(&ctx, to);
    if !fails.is_empty() {
        let why: Vec<String> = fails.iter().map(|(f, _, r)| format!("{f}: {r}")).collect();
        return Err(why.join("; "));
    }
    let reason = match p.reason.as_deref().map(str::trim) {
        Some(r) if !r.is_empty() => format!("plugin {plugin}: {r}"),
        _ => format!("plugin {plugin}"),
    };
    sim.apply(&members, to, Purpose::Balance, &reason, group.as_deref());
    Ok(())
}

fn refuse(sim: &mut Draft, plugin: &str, p: &Proposal, why: &str) {
    let text = format!(
        "plugin {plugin} proposed moving it to {}: refused, {why}",
        p.target
    );
    match sim.cluster.guest_idx(p.vmid) {
        Some(g) => sim.skip(g, text),
        None => sim
            .warnings
            .push(Warning::about(format!("guest {}", p.vmid), text)),
    }
}
