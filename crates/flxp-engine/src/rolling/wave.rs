//! Which nodes of a rolling maintenance may be out together: up to `parallel`, in order, while
//! every other node is online, more than half of all nodes stay online (quorum), the guests of
//! all of them fit on the others with every hard rule kept, and the nodes left keep N+1 headroom
//! (any one of them may fail and its running guests still fit on the rest). The first node that
//! may not join ends the wave, with the reason.

use flxp_core::Cluster;
use flxp_core::consolidate::headroom_breach;

use super::RollingOptions;
use crate::execute::{Executor, error_chain};
use crate::planning::Goal;

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

impl Executor {
    /// The next wave from `rest` (not empty; its first node always leads the wave, and is
    /// checked when it goes out), and the node that had to wait with why.
    pub(crate) async fn next_wave(
        &self,
        rest: &[String],
        options: &RollingOptions,
    ) -> (Vec<String>, Option<(String, String)>) {
        let mut wave: Vec<String> = rest.iter().take(1).cloned().collect();
        for n in rest.iter().skip(1) {
            if wave.len() >= options.parallel.max(1) {
                break;
            }
            let mut with = wave.clone();
            with.push(n.clone());
            if let Err(why) = self.may_be_out_together(&with, options).await {
                return (wave, Some((n.clone(), why)));
            }
            wave = with;
        }
        (wave, None)
    }

    /// Whether the nodes `set` may all be out at once; why not otherwise.
    async fn may_be_out_together(
        &self,
        set: &[String],
        options: &RollingOptions,
    ) -> Result<(), String> {
        let model = self.read().await.map_err(|e| error_chain(&e))?;
        let c = &model.cluster;
        may_leave(c, set)?;
        let goal = Goal::Evacuate {
            nodes: set.to_vec(),
            options: options.evacuate.clone(),
        };
        let plan = self.plan(&goal).await.map_err(|e| error_chain(&e))?;
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
        match headroom_breach(c, &after, &hosts, self.placer.options()) {
            Some(why) => Err(format!(
                "with {} out together the others lack N+1 headroom: {why}",
                set.join(", ")
            )),
            None => Ok(()),
        }
    }
}
