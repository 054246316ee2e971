//! What flxp did, as [`Event`]s: from a run (the API's or a one-off command's), from a daemon
//! round ([`RoundWatch`], which remembers the last rounds so that a state that lasts, a guest
//! that cannot leave a node, is told once, not every round), and a maintenance step.

use std::collections::BTreeMap;
use std::sync::Mutex;

use flxp_core::balance::Plan;
use flxp_core::left_running::LeftRunning;
use flxp_engine::{ExecutionReport, Goal, RoundReport};
use serde_json::json;

use crate::event::{
    EVACUATION_INCOMPLETE, Event, LEASE_LOST, LEASE_TAKEN, MAINTENANCE_STEP, MIGRATION_FAILED,
    NODE_SHUTDOWN, NODE_WOKEN, PLAN_UNMET,
};

/// One event per failed migration, and per migration whose outcome is unknown.
pub fn failed(zone: &str, report: &ExecutionReport) -> Vec<Event> {
    let unknown = report.unknown.iter().map(|f| (f, true));
    report
        .failed
        .iter()
        .map(|f| (f, false))
        .chain(unknown)
        .map(|(f, unknown)| {
            let what = if unknown {
                "has an unknown outcome"
            } else {
                "failed"
            };
            Event::new(
                MIGRATION_FAILED,
                zone,
                format!(
                    "flxp: migration of {} ({}) from {} to {} {what} in zone {zone}: {}",
                    f.vmid, f.name, f.from, f.to, f.error
                ),
                json!({
                    "vmid": f.vmid, "name": f.name, "from": f.from, "to": f.to,
                    "error": f.error, "unknown_outcome": unknown,
                }),
            )
        })
        .collect()
}

fn incomplete(zone: &str, node: &str, left: &[&LeftRunning]) -> Event {
    let names: Vec<String> = left
        .iter()
        .map(|g| format!("{} ({})", g.vmid, g.name))
        .collect();
    Event::new(
        EVACUATION_INCOMPLETE,
        zone,
        format!(
            "flxp: the evacuation of {node} in zone {zone} leaves {} running guest(s): {}",
            left.len(),
            names.join(", ")
        ),
        json!({
            "node": node,
            "guests": left.iter().map(|g| json!({ "vmid": g.vmid, "name": g.name, "reason": g.reason })).collect::<Vec<_>>(),
        }),
    )
}

fn unmet(zone: &str, goal: &str, reasons: &[String]) -> Event {
    Event::new(
        PLAN_UNMET,
        zone,
        format!(
            "flxp: the {goal} plan in zone {zone} cannot meet its goal: {}",
            reasons.join("; ")
        ),
        json!({ "goal": goal, "reasons": reasons }),
    )
}

/// The events of a run that carried out (or tried to) `plan` for `goal`: failed migrations,
/// guests the evacuation left running (`left`, read after the run), an unmet goal.
pub fn from_run(
    zone: &str,
    goal: &Goal,
    plan: &Plan,
    report: Option<&ExecutionReport>,
    left: &[LeftRunning],
) -> Vec<Event> {
    let mut out = report.map(|r| failed(zone, r)).unwrap_or_default();
    if matches!(goal, Goal::Evacuate { .. }) {
        let mut by_node: BTreeMap<&str, Vec<&LeftRunning>> = BTreeMap::new();
        for g in left {
            by_node.entry(g.node.as_str()).or_default().push(g);
        }
        out.extend(by_node.into_iter().map(|(n, l)| incomplete(zone, n, &l)));
    }
    let why = crate::app::plan::unmet(plan, goal);
    if !why.is_empty() {
        out.push(unmet(zone, goal.as_str(), &why));
    }
    out
}

/// Power saving woke `node`; `why` is the decision.
pub fn woken(zone: &str, node: &str, why: &str) -> Event {
    Event::new(
        NODE_WOKEN,
        zone,
        format!("flxp: woke node {node} in zone {zone} (power saving: more room needed)"),
        json!({ "node": node, "decision": why }),
    )
}

/// Power saving shut `node` down; `why` is the decision.
pub fn shut_down(zone: &str, node: &str, why: &str) -> Event {
    Event::new(
        NODE_SHUTDOWN,
        zone,
        format!("flxp: shut node {node} down in zone {zone} (power saving)"),
        json!({ "node": node, "decision": why }),
    )
}

/// A node entered (`on`) or left maintenance through flxp.
pub fn maintenance_step(zone: &str, node: &str, on: bool) -> Event {
    step(zone, node, if on { "entered" } else { "left" })
}

/// A step of maintenance on `node`: `entered`, `left`, or a rolling maintenance's own step names.
pub fn step(zone: &str, node: &str, step: &str) -> Event {
    Event::new(
        MAINTENANCE_STEP,
        zone,
        format!("flxp: node {node} in zone {zone}: maintenance {step}"),
        json!({ "node": node, "step": step }),
    )
}

/// What the rounds of one zone left to compare the next with.
#[derive(Debug, Default)]
struct Seen {
    /// Whether this process held the lease at the last round that could tell.
    held: Option<bool>,
    /// Per node in maintenance, the running guests last told of.
    left: BTreeMap<String, Vec<u32>>,
    /// Per goal, the reasons last told of.
    unmet: BTreeMap<&'static str, Vec<String>>,
}

/// Turns daemon rounds into events, each lasting state told once.
#[derive(Debug, Default)]
pub struct RoundWatch {
    lease: bool,
    zones: Mutex<BTreeMap<String, Seen>>,
}

impl RoundWatch {
    /// A watch; `lease`: whether the daemon keeps zone leases (else no lease events).
    pub fn new(lease: bool) -> Self {
        Self {
            lease,
            zones: Mutex::default(),
        }
    }

    /// The events of one round.
    pub fn events(&self, r: &RoundReport) -> Vec<Event> {
        let mut zones = self.zones.lock().unwrap_or_else(|e| e.into_inner());
        let seen = zones.entry(r.zone.clone()).or_default();
        let zone = r.zone.as_str();
        let mut out = Vec::new();
        if self.lease {
            if r.standby.is_some() {
                if seen.held == Some(true) {
                    out.push(Event::new(
                        LEASE_LOST,
                        zone,
                        format!(
                            "flxp: lost the lease of zone {zone}: {}",
                            r.standby.as_deref().unwrap_or_default()
                        ),
                        json!({ "holder": flxp_engine::lease::holder_id() }),
                    ));
                }
                seen.held = Some(false);
            } else if r.error.is_none() && seen.held != Some(true) {
                out.push(Event::new(
                    LEASE_TAKEN,
                    zone,
                    format!("flxp: took the lease of zone {zone}: this flxp acts there now"),
                    json!({ "holder": flxp_engine::lease::holder_id() }),
                ));
                seen.held = Some(true);
            }
        }
        if r.standby.is_some() || r.error.is_some() {
            return out;
        }
        let executions = [&r.evacuation, &r.balance]
            .into_iter()
            .flatten()
            .filter_map(|x| x.execution.as_ref())
            .chain(r.power.iter().filter_map(|p| p.execution.as_ref()));
        for report in executions {
            out.extend(failed(zone, report));
        }
        if r.evacuation.is_some() {
            for m in &r.maintenance {
                let running: Vec<&LeftRunning> = m.state.running().iter().collect();
                let vmids: Vec<u32> = running.iter().map(|g| g.vmid).collect();
                let before = seen.left.insert(m.node.clone(), vmids.clone());
                if !vmids.is_empty() && before.as_ref() != Some(&vmids) {
                    out.push(incomplete(zone, &m.node, &running));
                }
            }
        }
        // A node out of maintenance is forgotten: entering it again is told again.
        seen.left
            .retain(|n, _| r.maintenance.iter().any(|m| &m.node == n));
        let plans = [
            (
                "evacuate",
                r.evacuation.as_ref(),
                Goal::Evacuate {
                    nodes: Vec::new(),
                    options: Default::default(),
                },
            ),
            (
                "balance",
                r.balance.as_ref(),
                Goal::Balance(Default::default()),
            ),
        ];
        for (name, executed, goal) in plans {
            let why = executed
                .map(|x| crate::app::plan::unmet(&x.plan, &goal))
                .unwrap_or_default();
            let before = seen.unmet.insert(name, why.clone());
            if !why.is_empty() && before.as_ref() != Some(&why) {
                out.push(unmet(zone, name, &why));
            }
        }
        if let Some(p) = &r.power {
            out.extend(p.woken.iter().map(|n| woken(zone, n, &p.decision)));
            out.extend(
                p.switched_off
                    .iter()
                    .map(|n| shut_down(zone, n, &p.decision)),
            );
        }
        out
    }
}
