//! What a plan leaves undone, said the same way by the command line, the service and webhooks.

use flxp_core::balance::{Overfull, Plan, PlanStop, Purpose};
use flxp_engine::Goal;

/// Why a plan leaves the request unmet, one phrase each (empty: met). Evacuation: a guest that
/// must leave fits nowhere. Balancing: that, or hard rules stay broken, or the imbalance is above
/// the threshold and no safe move lowers it. Exit code 3 is this list being non-empty, and the
/// human headline and `--json` (`unmet`) name it, so a plan never says "no balancing needed"
/// while exiting 3 without saying why.
pub fn unmet(plan: &Plan, goal: &Goal) -> Vec<String> {
    unmet_leaving(plan, goal, &plan.overfull)
}

/// [`unmet`], with the nodes left over their memory as `overfull` names them: after a run, as
/// the cluster read again shows them rather than as the plan expected.
pub fn unmet_leaving(plan: &Plan, goal: &Goal, overfull: &[Overfull]) -> Vec<String> {
    let mut why = Vec::new();
    if !plan.unplaced.is_empty() {
        why.push(format!(
            "{} guest(s) that must move fit on no node",
            plan.unplaced.len()
        ));
    }
    if matches!(goal, Goal::Evacuate { .. }) {
        return why;
    }
    // A node reporting more memory used than it has is counted as full: balancing cannot show
    // it any emptier until its excess is gone, whatever the spread says.
    why.extend(overfull_phrase(overfull));
    // A balance plugin that failed (with `ignore`) is why nothing moves: say that, not that the
    // cluster offers no safe move.
    if let Some((p, e)) = plan
        .plugin
        .as_ref()
        .and_then(|p| p.error.as_ref().map(|e| (p, e)))
    {
        why.push(format!(
            "balance plugin {} failed: {e}; planned no migration",
            p.plugin
        ));
        if !plan.violations_after.is_empty() {
            why.push(format!(
                "{} broken rule(s) stay broken",
                plan.violations_after.len()
            ));
        }
        return why;
    }
    // A rule waiting for a migration in flight is being fixed: the next run, once the guest has
    // landed, moves the rest. Only the others leave the request unmet.
    let broken = plan
        .violations_after
        .len()
        .saturating_sub(plan.waiting.len());
    if broken > 0 {
        // The budget stopped fixing: that is the cause, not that no node fits.
        why.push(match &plan.rules_stop {
            Some(cause) => format!("{broken} broken rule(s) stay broken: {cause}"),
            None => format!("{broken} broken rule(s) cannot be fixed"),
        });
    }
    let balanced = plan
        .migrations
        .iter()
        .any(|m| matches!(m.purpose, Purpose::Balance | Purpose::Swap));
    // Above the threshold it is unmet when nothing balanced, or when balancing stopped early
    // (budget, margin, no further gain): the headline names that cause.
    if plan.imbalance_after > plan.threshold && (!balanced || plan.stop.is_some()) {
        let left: Vec<&str> = plan
            .left_in_place
            .iter()
            .map(|l| l.reason.as_str())
            .collect();
        let cause = plan.stop.clone().unwrap_or(PlanStop::NoSafeMove {
            storage: Vec::new(),
        });
        let threshold = plan.measure.fmt(plan.threshold);
        why.push(if cause.is_no_move() && !left.is_empty() {
            format!(
                "the imbalance stays above the threshold {threshold} and {cause} ({})",
                left.join("; ")
            )
        } else if cause.is_no_move() {
            format!("the imbalance stays above the threshold {threshold} and {cause}")
        } else {
            format!("the imbalance stays above the threshold {threshold}: {cause}")
        });
    }
    why
}

/// The phrase `unmet` gets for nodes left over their memory, or none:
/// `1 node(s) stay over their memory, counted as full: a (296.0 GiB used of 64.0 GiB)`.
pub fn overfull_phrase(overfull: &[Overfull]) -> Option<String> {
    (!overfull.is_empty()).then(|| {
        let nodes: Vec<String> = overfull.iter().map(ToString::to_string).collect();
        format!(
            "{} node(s) stay over their memory, counted as full: {}",
            overfull.len(),
            nodes.join(", ")
        )
    })
}
