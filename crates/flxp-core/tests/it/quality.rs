//! Plan quality on small clusters: the planner's exact improvement against the exact search run
//! as an independent baseline (strict mode off), and the bounds every plan reports.

use flxp_core::balance::exact::{Family, Goal, fewest_migrations};
use flxp_core::balance::{BalanceOptions, Plan, plan, replay};
use flxp_core::{Cluster, Overrides, Rules, State};

use crate::balance::placer;

/// Budget of search states for the baseline: enough for the generated families.
const BASELINE: u64 = 20_000_000;

fn options() -> BalanceOptions {
    BalanceOptions {
        max_migrations: 50,
        ..BalanceOptions::default()
    }
}

fn cluster(f: Family, seed: u64) -> Cluster {
    Cluster::from_snapshot(&f.generate(seed), &Overrides::default()).unwrap()
}

/// The plan, checked to replay, and the fewest migrations (then bytes) reaching what it reaches.
fn plan_and_fewest(c: &Cluster, o: &BalanceOptions) -> (Plan, Option<(usize, u64)>) {
    let (r, s) = (Rules::compile(c), State::new(c));
    let p = plan(c, &r, &s, &placer(), o).unwrap();
    replay(c, &r, &s, &placer(), &p.migrations).unwrap();
    if p.migrations.is_empty() {
        return (p, Some((0, 0)));
    }
    let goal = Goal::of_plan(c, &p, o);
    let best = fewest_migrations(c, &r, &s, &placer(), &goal, p.migrations.len(), BASELINE)
        .ok()
        .map(|b| (b.migrations, b.bytes));
    (p, best)
}

#[test]
fn a_small_cluster_gets_the_fewest_migrations_where_the_greedy_search_needs_more() {
    // Heterogeneous #3: the greedy search and its post-pass need 9 migrations, 98 GiB; 7 reach
    // the same spread.
    let c = cluster(Family::Heterogeneous, 3);
    let (p, best) = plan_and_fewest(&c, &options());
    let (fewest, bytes) = best.unwrap();
    assert_eq!(fewest, 7);
    assert_eq!(
        (p.migrations.len(), p.bytes),
        (fewest, bytes),
        "{}",
        p.summary
    );
    assert!(p.summary.contains("exact search"), "{}", p.summary);
    // The greedy plan alone (no post-pass, so no exact search) needs more.
    let greedy = BalanceOptions {
        prune: false,
        ..options()
    };
    let (g, _) = plan_and_fewest(&c, &greedy);
    assert!(g.migrations.len() > fewest, "{}", g.summary);
    assert!(p.imbalance_after <= g.imbalance_after + 1e-9);
}

#[test]
fn plans_of_every_family_are_within_a_fifth_of_the_fewest_migrations_and_bytes() {
    for f in Family::ALL {
        for seed in 1..=4 {
            let c = cluster(f, seed);
            let (p, best) = plan_and_fewest(&c, &options());
            let Some((fewest, bytes)) = best else {
                continue;
            };
            let k = p.migrations.len();
            assert!(
                k as f64 <= 1.2 * fewest as f64,
                "{} #{seed}: {k} migrations, the fewest {fewest}",
                f.name()
            );
            assert!(
                p.bytes as f64 <= 1.2 * bytes as f64,
                "{} #{seed}: {} B, the fewest {bytes} B",
                f.name(),
                p.bytes
            );
        }
    }
}
