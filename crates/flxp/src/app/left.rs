//! What an evacuation leaves running on the nodes it empties, read from the zone (or the file)
//! after planning and again after the run: a node with a running guest left is not safe to reboot,
//! so `flxp evacuate` then exits 3 and names each guest with why it stays.

use flxp_core::Model;
use flxp_core::balance::Plan;
use flxp_core::left_running::{LeftRunning, left_running, left_running_after};
use flxp_engine::{ExecutionReport, Executor, Goal};

use crate::output::say;

/// The running guests `plan` leaves on the nodes `goal` evacuates, on `model`; empty for
/// other goals. After a run (`run`, its report), each guest the run meant to move says what
/// became of its migration.
pub(crate) fn on_model(
    model: &Model,
    goal: &Goal,
    plan: &Plan,
    run: Option<&ExecutionReport>,
) -> Vec<LeftRunning> {
    let Goal::Evacuate { nodes, .. } = goal else {
        return Vec::new();
    };
    let idx: Vec<_> = nodes
        .iter()
        .filter_map(|n| model.cluster.node_idx_loose(n))
        .collect();
    match run {
        Some(r) => left_running_after(&model.cluster, &idx, plan, &r.outcomes(plan)),
        None => left_running(&model.cluster, &idx, plan, false),
    }
}

/// [`on_model`] on the zone as it is now; a failed read is said, and counts as nothing known.
pub(crate) async fn in_zone(
    executor: &Executor,
    goal: &Goal,
    plan: &Plan,
    run: Option<&ExecutionReport>,
) -> Vec<LeftRunning> {
    if !matches!(goal, Goal::Evacuate { .. }) {
        return Vec::new();
    }
    match executor.read().await {
        Ok(model) => on_model(&model, goal, plan, run),
        Err(e) => {
            crate::output::tell(format!(
                "warning: cannot read the zone to tell what still runs on the emptied node(s): {}",
                flxp_engine::error_chain(&e)
            ));
            Vec::new()
        }
    }
}

/// The phrase `unmet` gets for guests left running (exit code 3), or none.
pub(crate) fn phrase(left: &[LeftRunning], carried_out: bool) -> Option<String> {
    if left.is_empty() {
        return None;
    }
    let nodes: std::collections::BTreeSet<&str> = left.iter().map(|l| l.node.as_str()).collect();
    Some(format!(
        "{} running guest(s) {} on {}: not safe to reboot",
        left.len(),
        if carried_out { "still" } else { "would stay" },
        nodes.into_iter().collect::<Vec<_>>().join(", ")
    ))
}

/// Prints each guest left running with why, for people.
pub(crate) fn print(left: &[LeftRunning], carried_out: bool) {
    if left.is_empty() {
        return;
    }
    say(format!(
        "\n{} on the emptied node(s) ({}):",
        if carried_out {
            "still running"
        } else {
            "would stay running"
        },
        left.len()
    ));
    for l in left {
        say(format!(
            "  {} {} on {}: {}",
            l.vmid, l.name, l.node, l.reason
        ));
    }
}
