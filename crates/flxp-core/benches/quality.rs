//! Plan quality against an exact baseline on small generated clusters.
//!
//! For each family of `balance::exact::Family` (4–6 nodes, 10–16 VMs; medium 7–9 nodes, 20–36
//! VMs) and each seed, flxp plans
//! with default options and a budget of 50; the exact search then finds the fewest migrations (and
//! among them the fewest bytes) that reach the same imbalance with no more broken rules and the
//! same nodes in maintenance emptied, every step safe. Prints per family the mean and worst ratio
//! of flxp's migrations and bytes to the optimum, and of flxp's plan to its reported lower bound.
//!
//! Run: `cargo bench -p flxp-core --features exact --bench quality` (`seeds=N`, default 12;
//! `family=NAME` only that family; `verbose` each cluster; `move-cost-gib=X`, `effort=S` and
//! `no-prune` change the planner's options).

use std::time::Instant;

use flxp_core::balance::exact::{Family, Goal, fewest_migrations};
use flxp_core::balance::{BalanceOptions, plan, replay};
use flxp_core::placement::{PlacementOptions, Placer};
use flxp_core::{Cluster, Overrides, Rules, State};

/// Search nodes the exact method may expand per cluster before giving up.
const BUDGET: u64 = 20_000_000;

#[derive(Default)]
struct Sums {
    clusters: usize,
    compared: usize,
    unsolved: usize,
    flxp: usize,
    best: usize,
    moves: Vec<f64>,
    bytes: Vec<f64>,
    gap: Vec<f64>,
    /// Slowest plan, seconds.
    slowest: f64,
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.iter().sum::<f64>() / v.len() as f64
}

fn worst(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::NAN, f64::max)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let seeds: u64 = args
        .iter()
        .find_map(|a| a.strip_prefix("seeds=").and_then(|n| n.parse().ok()))
        .unwrap_or(12);
    let verbose = args.iter().any(|a| a == "verbose");
    // `family=NAME`: only that family (its name as in the table).
    let only: Option<&str> = args.iter().find_map(|a| a.strip_prefix("family="));
    let wanted = |f: &Family| only.is_none_or(|n| n == f.name());
    let placer = Placer::new(PlacementOptions::default(), Vec::new()).expect("default options");
    let cost: Option<f64> = args.iter().find_map(|a| {
        a.strip_prefix("move-cost-gib=")
            .and_then(|n| n.parse().ok())
    });
    // `effort=S`: thorough mode, as `flxp balance --effort S`.
    let effort: Option<f64> = args
        .iter()
        .find_map(|a| a.strip_prefix("effort=").and_then(|n| n.parse().ok()));
    let defaults = BalanceOptions::default();
    let options = BalanceOptions {
        max_migrations: 50,
        move_cost_gib: cost.unwrap_or(defaults.move_cost_gib),
        effort_secs: effort.unwrap_or(defaults.effort_secs),
        prune: !args.iter().any(|a| a == "no-prune"),
        ..defaults
    };
    println!("## Plan quality against the exact optimum ({seeds} clusters per family)\n");
    println!(
        "| family | clusters that move | flxp migrations | fewest | migrations ÷ fewest, mean | worst | bytes ÷ fewest, mean | worst | migrations ÷ reported bound, mean | unsolved | slowest plan |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let started = Instant::now();
    let mut all = Sums::default();
    for f in Family::ALL.into_iter().filter(wanted) {
        let s = measure(f, seeds, verbose, &placer, &options);
        row(f.name(), &s);
        all.clusters += s.clusters;
        all.compared += s.compared;
        all.unsolved += s.unsolved;
        all.flxp += s.flxp;
        all.best += s.best;
        all.moves.extend(s.moves);
        all.bytes.extend(s.bytes);
        all.gap.extend(s.gap);
        all.slowest = all.slowest.max(s.slowest);
    }
    row("**all**", &all);
    // Larger clusters after the total, which stays comparable with earlier runs.
    for f in Family::LARGER.into_iter().filter(wanted) {
        row(f.name(), &measure(f, seeds, verbose, &placer, &options));
    }
    println!(
        "\n({:.1} s; the exact search expands at most {BUDGET} nodes per cluster.)",
        started.elapsed().as_secs_f64()
    );
}

/// flxp against the exact optimum on `seeds` clusters of one family.
fn measure(
    f: Family,
    seeds: u64,
    verbose: bool,
    placer: &Placer,
    options: &BalanceOptions,
) -> Sums {
    let mut s = Sums::default();
    for seed in 1..=seeds {
        let c = Cluster::from_snapshot(&f.generate(seed), &Overrides::default())
            .expect("generated snapshot");
        let (rules, state) = (Rules::compile(&c), State::new(&c));
        let t = Instant::now();
        let p = plan(&c, &rules, &state, placer, options).expect("plan");
        let took = t.elapsed().as_secs_f64();
        s.slowest = s.slowest.max(took);
        replay(&c, &rules, &state, placer, &p.migrations).expect("plan replays");
        s.clusters += 1;
        if p.migrations.is_empty() {
            continue;
        }
        let goal = Goal::of_plan(&c, &p, options);
        let Ok(best) = fewest_migrations(
            &c,
            &rules,
            &state,
            placer,
            &goal,
            p.migrations.len(),
            BUDGET,
        ) else {
            s.unsolved += 1;
            continue;
        };
        replay(&c, &rules, &state, placer, &best.migrations(&c)).expect("optimum replays");
        if verbose {
            eprintln!(
                "{} #{seed}: flxp {} ({} B), fewest {} ({} B), plan {:.1} ms",
                f.name(),
                p.migrations.len(),
                p.bytes,
                best.migrations,
                best.bytes,
                1000.0 * took
            );
        }
        s.compared += 1;
        s.flxp += p.migrations.len();
        s.best += best.migrations;
        s.moves
            .push(p.migrations.len() as f64 / best.migrations.max(1) as f64);
        if best.bytes > 0 {
            s.bytes.push(p.bytes as f64 / best.bytes as f64);
        }
        if let Some(g) = p.bounds.migrations_gap {
            s.gap.push(g);
        }
        if let Some(k) = p.bounds.migrations {
            assert!(
                k <= best.floor,
                "{} #{seed}: bound {k} above the optimum",
                f.name()
            );
        }
    }
    s
}

/// One table row.
fn row(name: &str, s: &Sums) {
    println!(
        "| {} | {} of {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {} | {:.0} ms |",
        name,
        s.compared,
        s.clusters,
        s.flxp,
        s.best,
        mean(&s.moves),
        worst(&s.moves),
        mean(&s.bytes),
        worst(&s.bytes),
        mean(&s.gap),
        s.unsolved,
        1000.0 * s.slowest
    );
}
