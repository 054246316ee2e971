//! Small clusters solved exactly: after the greedy search, the exact search of [`super::exact`]
//! looks for a plan that reaches the greedy plan's imbalance with no other broken rules, the same
//! guests off nodes outside the balance, and fewer migrations (or as many and fewer bytes).
//!
//! It runs only where the problem is small (guests the search may move × balanced nodes at most
//! [`SMALL`]) and within a budget of search states ([`WORK`]), never wall-clock time, so the same
//! snapshot gives the same plan on every machine. Thorough mode (`effort_secs`) lifts both, in
//! proportion to the seconds given. The exact plan is kept only if it replays safely step by
//! step and keeps the greedy planner's rules for balancing steps (strict mode); otherwise the
//! greedy plan stands.

use crate::cluster::{Cluster, GuestIdx, NodeIdx};
use crate::constraints::Rules;
use crate::placement::{Ctx, Placer, Subject};
use crate::state::State;
use crate::units::fmt_bytes;

use super::check::replay;
use super::draft::Draft;
use super::exact::{Goal, Optimum, beating, candidates};
use super::measure::balanced_nodes;
use super::options::BalanceOptions;
use super::plan::{Plan, Purpose};
use super::planner::finish;
use super::softness::{penalty, traded};

/// Largest problem solved exactly by default: guests the search may move × balanced nodes
/// (16 guests on 6 nodes is 96).
pub(crate) const SMALL: usize = 192;
/// Search states the default planner may visit in the exact search: at most a few hundred
/// milliseconds on the benchmark's clusters, most of them take a few.
pub(crate) const WORK: u64 = 250_000;
/// Thorough mode: search states per second of `effort_secs`, and how much larger a problem it
/// solves exactly.
const WORK_PER_SEC: f64 = 400_000.0;
const EFFORT_SIZE: usize = 8;

/// The greedy plan, or a plan the exact search found that needs fewer migrations (or as many
/// and fewer bytes) to reach what it reaches.
pub(crate) fn improve(
    cluster: &Cluster,
    rules: &Rules,
    state: &State,
    placer: &Placer,
    options: &BalanceOptions,
    greedy: Plan,
) -> Plan {
    if !options.prune || greedy.migrations.is_empty() {
        return greedy;
    }
    let goal = Goal {
        strict: true,
        ..Goal::of_plan(cluster, &greedy, options)
    };
    let thorough = options.effort_secs > 0.0;
    let limit = if thorough { SMALL * EFFORT_SIZE } else { SMALL };
    let nodes = balanced_nodes(cluster).count();
    // Cheap first: running guests bound the guests the search may move (large clusters stop here).
    let running = cluster.guests().iter().filter(|g| g.running).count();
    if (running + goal.must_leave.len()).saturating_mul(nodes) > limit {
        return greedy;
    }
    let movable = candidates(cluster, rules, &goal);
    // A greedy move of a guest the search may not move (a stopped guest sent to its pin, a
    // bundle): the search cannot reproduce it, so the greedy plan stands.
    let all_movable = greedy.migrations.iter().all(|m| {
        cluster
            .guest_idx(m.vmid)
            .is_some_and(|g| movable.contains(&g))
    });
    if !all_movable {
        return greedy;
    }
    let budget = if thorough {
        WORK.max((options.effort_secs * WORK_PER_SEC) as u64)
    } else {
        WORK
    };
    let incumbent = (greedy.migrations.len(), greedy.bytes);
    let Ok(best) = beating(cluster, rules, state, placer, &goal, incumbent, budget) else {
        return greedy;
    };
    adopt(cluster, rules, state, placer, options, greedy, &best)
}

/// The exact result as a plan, if it replays safely and ends no worse than the greedy plan;
/// else the greedy plan.
fn adopt(
    cluster: &Cluster,
    rules: &Rules,
    state: &State,
    placer: &Placer,
    options: &BalanceOptions,
    greedy: Plan,
    best: &Optimum,
) -> Plan {
    let measure = options.measure;
    let mut sim = Draft::for_options(cluster, rules, placer, state, options);
    let why = if best.exact {
        format!(
            "one of the fewest migrations ({}) that reach",
            best.migrations
        )
    } else {
        format!("one of {} migrations that reach", best.migrations)
    };
    for &(g, t, purpose) in &best.moves {
        let reason = reason(&sim, g, t, purpose, &why, measure.as_str());
        sim.apply(&[g], t, purpose, &reason, None);
    }
    let mut plan = finish(
        sim,
        state,
        &greedy.method,
        options.metric,
        greedy.threshold,
        greedy.target,
    );
    let safe = replay(cluster, rules, state, placer, &plan.migrations).is_ok();
    let no_new_breaks = plan
        .violations_after
        .iter()
        .all(|v| greedy.violations_after.contains(v));
    if !safe || !no_new_breaks || plan.imbalance_after > greedy.imbalance_after + 1e-9 {
        return greedy;
    }
    for (i, m) in plan.migrations.iter_mut().enumerate() {
        m.wave = i as u32;
    }
    let moved: Vec<u32> = plan.migrations.iter().map(|m| m.vmid).collect();
    plan.skipped = greedy
        .skipped
        .into_iter()
        .filter(|s| !moved.contains(&s.vmid))
        .collect();
    plan.unplaced = greedy.unplaced;
    plan.left_in_place = greedy.left_in_place;
    plan.warnings = greedy.warnings;
    plan.rules_stop = greedy
        .rules_stop
        .filter(|_| !plan.violations_after.is_empty());
    plan.usage = greedy.usage;
    // Still above the threshold: the greedy search's reason for stopping holds for this plan too.
    plan.stop = greedy
        .stop
        .filter(|_| plan.imbalance_after > plan.threshold);
    let m = measure;
    plan.summary = format!(
        "{} {} → {} with {} migration(s), {} to copy: {} {} {} {} (exact search on a small \
         cluster; the greedy search needed {} migration(s), {})",
        m.as_str(),
        m.fmt(plan.imbalance_before),
        m.fmt(plan.imbalance_after),
        plan.migrations.len(),
        fmt_bytes(plan.bytes),
        if best.exact {
            "the fewest migrations"
        } else {
            "fewer migrations or bytes than the greedy search"
        },
        if best.exact { "that reach" } else { "to reach" },
        m.as_str(),
        m.fmt(plan.imbalance_after),
        greedy.migrations.len(),
        fmt_bytes(greedy.bytes)
    );
    // Thorough mode's note on its searches stays.
    if let Some(at) = greedy.summary.find(" (thorough mode: ") {
        plan.summary.push_str(&greedy.summary[at..]);
    }
    plan
}

/// Why the exact plan moves a guest there.
fn reason(sim: &Draft, g: GuestIdx, t: NodeIdx, purpose: Purpose, why: &str, m: &str) -> String {
    let s = sim.state.location(g);
    let (cs, ct) = (&sim.cluster.node(s).name, &sim.cluster.node(t).name);
    let what = match purpose {
        Purpose::Evacuate => format!("empties {cs}, which is outside the balance"),
        Purpose::Fix => "fixes a broken hard rule".to_owned(),
        _ => {
            let shift = sim.shift(&[g]);
            let e = sim.objective.effect(sim.cluster, &sim.state, s, t, &shift);
            let subject = Subject::guest(sim.cluster, sim.rules, g, s);
            let ctx = Ctx::new(
                sim.cluster,
                sim.rules,
                &sim.state,
                sim.placer.options(),
                &subject,
            );
            let worse = penalty(&ctx, t).saturating_sub(penalty(&ctx, s));
            format!(
                "balance {}: {cs} {:.1} % → {:.1} %, {ct} {:.1} % → {:.1} %{}",
                sim.objective.kind().as_str(),
                sim.objective.load(s),
                e.from.1,
                sim.objective.load(t),
                e.to.1,
                traded(sim.soft_weight, worse)
            )
        }
    };
    format!(
        "{what}; {why} this {m} (exact search, {} to copy)",
        fmt_bytes(sim.bytes(&[g]))
    )
}
