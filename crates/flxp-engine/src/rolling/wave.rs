//! Which nodes of a rolling maintenance may be out together: up to `parallel`, in order, while
//! every other node is online, more than half of all nodes stay online (quorum), the guests of
//! all of them fit on the others with every hard rule kept, and the nodes left keep N+1 headroom
//! (any one of them may fail and its running guests still fit on the rest). The first node that
//! may not join ends the wave, with the reason.

use std::sync::Arc;

use flxp_core::Cluster;
use flxp_core::balance::Plan;
use flxp_core::consolidate::headroom_breach;
use flxp_core::placement::Placer;

use super::RollingOptions;
use crate::blocking;
use crate::execute::{Executor, error_chain};
use crate::planning::{self, Model};

/// Whether the nodes `set` may all be out: every other node online, and more than half of all
/// nodes online without them (quorum); why not otherwise.
pub(super) fn may_leave(cluster: &Cluster, set: &[String]) -> Result<(), String> {
    let down: Vec<&str> = cluster
        .nodes()
        .iter()
        .filter(|n| !n.is_online() && !set.contains(&n.name))
        .map(|n| n.name.as_str())
        .collect();
    if !down.is_empty() {
        return Err(format!(
            "node(s) {} are not online: only the nodes of a wave are out at a time",
            down.join(", ")
        ));
    }
    let total = cluster.nodes().len();
    let out = set.len().clamp(1, total);
    if 2 * (total - out) <= total {
        return Err(format!(
            "{} of {total} node(s) would stay online: quorum needs more than half",
            total - out
        ));
    }
    Ok(())
}

/// The guests an evacuation plan places nowhere, in words; `None` when it places every one.
pub(super) fn fit_nowhere(plan: &flxp_core::balance::Plan) -> Option<String> {
    if plan.unplaced.is_empty() {
        return None;
    }
    let who: Vec<String> = plan
        .unplaced
        .iter()
        .map(|u| format!("{} ({})", u.vmid, u.reason))
        .collect();
    Some(format!(
        "{} guest(s) fit on no other node: {}",
        who.len(),
        who.join("; ")
    ))
}

/// The next wave chosen from the nodes left, with the plans that chose it.
#[derive(Debug, Clone)]
pub(super) struct Wave {
    /// Its nodes, in order (the first node of the rest always leads it).
    pub nodes: Vec<String>,
    /// The node that had to wait for a later wave, with why.
    pub waits: Option<(String, String)>,
    /// With more than one node: the plan emptying them all, on which they were judged.
    pub together: Option<Plan>,
    /// Plans made to choose it.
    pub plans: usize,
}

/// The next wave from `rest` (not empty) on `model`: up to `parallel` nodes, in order, while
/// each one added keeps the set safe ([`out_together`]). The first node is not checked here:
/// it is checked when it goes out.
pub(super) fn next_wave_on(
    model: &Model,
    placer: &Placer,
    rest: &[String],
    options: &RollingOptions,
) -> Wave {
    let mut wave = Wave {
        nodes: rest.iter().take(1).cloned().collect(),
        waits: None,
        together: None,
        plans: 0,
    };
    for n in rest.iter().skip(1) {
        if wave.nodes.len() >= options.parallel.max(1) {
            break;
        }
        let mut with = wave.nodes.clone();
        with.push(n.clone());
        let judged = may_leave(&model.cluster, &with).and_then(|()| {
            wave.plans += 1;
            out_together(model, placer, &with, options)
        });
        match judged {
            Ok(plan) => {
                wave.nodes = with;
                wave.together = Some(plan);
            }
            Err(why) => {
                wave.waits = Some((n.clone(), why));
                break;
            }
        }
    }
    wave
}

/// Whether the guests of the nodes `set` (which [`may_leave`]) fit on the others with every hard
/// rule kept and N+1 headroom left: the plan that empties them all when they do, why not
/// otherwise.
fn out_together(
    model: &Model,
    placer: &Placer,
    set: &[String],
    options: &RollingOptions,
) -> Result<Plan, String> {
    let c = &model.cluster;
    let plan = evacuation_plan(model, placer, set, options).map_err(|e| error_chain(&e))?;
    if let Some(why) = fit_nowhere(&plan) {
        return Err(format!("with {} out together, {why}", set.join(", ")));
    }
    let mut after = model.state.clone();
    for m in &plan.migrations {
        if let (Some(g), Some(to)) = (c.guest_idx(m.vmid), c.node_idx(&m.to)) {
            after.move_guest(c, g, to);
        }
    }
    let hosts: Vec<_> = c
        .node_indexes()
        .filter(|&i| !set.contains(&c.node(i).name))
        .collect();
    match headroom_breach(c, &after, &hosts, placer.options()) {
        Some(why) => Err(format!(
            "with {} out together the others lack N+1 headroom: {why}",
            set.join(", ")
        )),
        None => Ok(plan),
    }
}

/// The plan that empties the nodes `set` on `model`, without its bounds: a rolling maintenance
/// judges and lists these plans only, and on a large cluster the bounds cost most of a plan.
pub(super) fn evacuation_plan(
    model: &Model,
    placer: &Placer,
    set: &[String],
    options: &RollingOptions,
) -> crate::Result<Plan> {
    let nodes = set
        .iter()
        .map(|n| planning::node(model, n))
        .collect::<crate::Result<Vec<_>>>()?;
    let unbounded = flxp_core::balance::EvacuateOptions {
        skip_bounds: true,
        ..options.evacuate.clone()
    };
    flxp_core::evacuate::evacuate(
        &model.cluster,
        &model.rules,
        &model.state,
        placer,
        &nodes,
        &unbounded,
    )
    .map_err(|source| crate::Error::Plan { source })
}

impl Executor {
    /// The next wave from `rest` (not empty; its first node always leads the wave, and is
    /// checked when it goes out), and the node that had to wait with why. One read of the
    /// cluster judges every node added.
    pub(crate) async fn next_wave(
        &self,
        rest: &[String],
        options: &RollingOptions,
    ) -> (Vec<String>, Option<(String, String)>) {
        let lead: Vec<String> = rest.iter().take(1).cloned().collect();
        let Some(second) = rest.get(1).filter(|_| options.parallel > 1) else {
            return (lead, None);
        };
        let model = match self.read().await {
            Ok(m) => Arc::new(m),
            Err(e) => return (lead, Some((second.clone(), error_chain(&e)))),
        };
        let (placer, rest, options) = (Arc::clone(&self.placer), rest.to_vec(), options.clone());
        let chosen = blocking::run("choosing a rolling maintenance's wave", move || {
            next_wave_on(&model, &placer, &rest, &options)
        })
        .await;
        match chosen {
            Ok(w) => (w.nodes, w.waits),
            Err(e) => (lead, Some((second.clone(), error_chain(&e)))),
        }
    }
}
