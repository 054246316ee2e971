//! A balance plugin as a method: one call per round, then every proposed migration checked on the
//! state the earlier accepted ones leave, with flxp's own movability rules, budget and placement
//! filters (capacity, hard rules). Every proposal gets one verdict in the plan's `plugin`:
//! accepted, or refused with its kind and reason.

use crate::cluster::{Cluster, NodeIdx};
use crate::placement::FilterKind;
use crate::plugin::{self, OnFailure, PROTOCOL_VERSION, PluginKind, Proposal, Request};
use crate::{Error, Result};

use super::super::draft::{Draft, Step};
use super::super::movable::Intent;
use super::super::options::BalanceOptions;
use super::super::plan::{Plan, PlanSource, PluginOutcome, ProposalVerdict, Purpose, Refusal};
use super::super::planner::finish;
use super::{MethodName, PlanInput};

/// What a balance plugin is, for users.
pub(super) const DESCRIPTION: &str =
    "a balance plugin from the config: its proposals, each checked by flxp";

/// Whether a balance plugin balances on `--usage`: it weighs its own figures.
pub(super) const READS_USAGE: bool = false;

/// Plans with the balance plugin `name` of the placer's plugins; `options` are already validated.
pub(super) fn plan(name: &str, input: &PlanInput<'_>, options: &BalanceOptions) -> Result<Plan> {
    let PlanInput {
        cluster,
        rules,
        state,
        placer,
    } = *input;
    let plugins = placer.plugins();
    let spec = plugins
        .get(name)
        .filter(|s| s.kind == PluginKind::Balance)
        .ok_or_else(|| Error::Option {
            name: "method".into(),
            message: format!("{name} is not a configured balance plugin"),
        })?;
    let measure = options.measure;
    let mut draft = Draft::for_options(cluster, rules, placer, state, options);
    let request = Request {
        protocol: PROTOCOL_VERSION,
        kind: PluginKind::Balance,
        plugin: spec.name.to_string(),
        zone: placer.zone().map(str::to_owned),
        guest: None,
        nodes: cluster
            .node_indexes()
            .map(|n| crate::placement::node_figures(cluster, state, placer.options(), n))
            .collect(),
        guests: Some(
            cluster
                .guest_indexes()
                .map(|g| crate::placement::guest_figures(cluster, state, g))
                .collect(),
        ),
    };
    let answer = plugins
        .call(spec, &request)
        .and_then(|b| plugin::parse_balance(&b));
    let mut outcome = PluginOutcome {
        plugin: spec.name.to_string(),
        error: None,
        proposals: Vec::new(),
    };
    match answer {
        Err(e) => {
            plugins.failed(spec, &e);
            if spec.on_failure == OnFailure::Fail {
                return Err(Error::Plugin {
                    plugin: spec.name.to_string(),
                    message: e.to_string(),
                });
            }
            outcome.error = Some(e.to_string());
        }
        Ok(proposals) => {
            for p in proposals {
                let verdict = step(&mut draft, &spec.name, &p);
                let (refused, why) = match verdict {
                    Ok(()) => (None, None),
                    Err((kind, why)) => (Some(kind), Some(why)),
                };
                outcome.proposals.push(ProposalVerdict {
                    vmid: p.vmid,
                    target: p.target,
                    reason: p.reason,
                    accepted: refused.is_none(),
                    refused,
                    why,
                });
            }
        }
    }
    let threshold = options.trigger.threshold_for(measure);
    let target = options.trigger.target_for(measure);
    let source = PlanSource::Balance(MethodName::plugin(std::sync::Arc::clone(&spec.name)));
    let mut plan = finish(draft, state, source, threshold, target);
    for (i, m) in plan.migrations.iter_mut().enumerate() {
        m.wave = i as u32;
    }
    let accepted = outcome.proposals.iter().filter(|p| p.accepted).count();
    let refused = outcome.proposals.len() - accepted;
    plan.summary = match &outcome.error {
        Some(e) => format!(
            "plugin {} failed: {e}; planned no migration (on-failure = \"ignore\")",
            name
        ),
        None => format!(
            "plugin {}: {accepted} proposed migration(s) accepted, {refused} refused as unsafe; {} {} → {}",
            name,
            measure.as_str(),
            measure.fmt(plan.imbalance_before),
            measure.fmt(plan.imbalance_after),
        ),
    };
    plan.plugin = Some(outcome);
    Ok(plan)
}

/// Checks one proposal on the draft's state and applies it, or says why not.
fn step(
    draft: &mut Draft,
    plugin: &str,
    p: &Proposal,
) -> std::result::Result<(), (Refusal, String)> {
    let cluster: &Cluster = draft.cluster;
    let g = cluster.guest_idx(p.vmid).ok_or_else(|| {
        (
            Refusal::UnknownGuest,
            format!("guest {} is not in the zone", p.vmid),
        )
    })?;
    let to: NodeIdx = cluster.node_idx(&p.target).ok_or_else(|| {
        (
            Refusal::UnknownNode,
            format!("node {:?} is not in the zone", p.target),
        )
    })?;
    if draft.has_moved(g) {
        return Err((Refusal::Duplicate, "it moves in this plan already".into()));
    }
    let unit = draft.units.of(g);
    let members = draft.units.get(unit).members.clone();
    if members.iter().all(|&m| draft.state.location(m) == to) {
        return Err((
            Refusal::AlreadyThere,
            format!("it is on {} already", p.target),
        ));
    }
    if let Some((m, stay)) = draft.unit_stays(unit, Intent::Balance) {
        let why = if m == g {
            stay.to_string()
        } else {
            format!("its group member {}: {stay}", cluster.guest(m).vmid)
        };
        return Err((Refusal::NotMovable, why));
    }
    if draft.unit_moved(unit) {
        return Err((
            Refusal::Duplicate,
            "a member of its group moves in this plan already".into(),
        ));
    }
    let moving = members
        .iter()
        .filter(|&&m| draft.state.location(m) != to)
        .count();
    if moving > draft.budget_left() {
        return Err((
            Refusal::Budget,
            format!(
                "beyond the migration budget of {} (raise --max-migrations)",
                draft.budget
            ),
        ));
    }
    if let Some((m, stay)) = draft.returning(&members, to) {
        let why = if m == g {
            stay.to_string()
        } else {
            format!("its group member {}: {stay}", cluster.guest(m).vmid)
        };
        return Err((Refusal::ReturnHold, why));
    }
    let group = draft.units.get(unit).group.clone();
    let subject = draft.subject(&members, group.as_deref());
    let ctx = draft.ctx(&subject);
    let fails = draft.placer.failures(&ctx, to);
    if !fails.is_empty() {
        let why: Vec<String> = fails.iter().map(|(f, _, r)| format!("{f}: {r}")).collect();
        let has = |k: FilterKind| fails.iter().any(|(_, kind, _)| *kind == k);
        let kind = if has(FilterKind::Availability) {
            Refusal::Unavailable
        } else if has(FilterKind::Rule) {
            Refusal::Rule
        } else {
            Refusal::Overcommit
        };
        return Err((kind, why.join("; ")));
    }
    let reason = match p.reason.as_deref().map(str::trim) {
        Some(r) if !r.is_empty() => format!("plugin {plugin}: {r}"),
        _ => format!("plugin {plugin}"),
    };
    draft.apply(
        &members,
        to,
        Purpose::Balance,
        &reason,
        group.as_deref(),
        Step::New,
    );
    Ok(())
}
