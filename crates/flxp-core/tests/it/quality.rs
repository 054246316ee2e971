//! Plan quality on small clusters: the planner's exact improvement against the exact search run
//! as an independent baseline (strict mode off), and the bounds every plan reports.

use flxp_core::balance::exact::{Family, Goal, fewest_migrations};
use flxp_core::balance::{BalanceOptions, Plan, plan, replay};
use flxp_core::{Cluster, Overrides, Rules, State};
use proptest::prelude::*;

use crate::support::placer;

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

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// On unseen generated clusters: the plan replays step by step (every filter on the state the
    /// earlier steps leave), and the lower bounds it reports never exceed what the exact search
    /// finds for the same goal.
    #[test]
    fn every_step_is_safe_and_the_reported_bounds_never_exceed_the_exact_optimum(
        f in 0usize..5,
        seed in 100u64..100_000,
    ) {
        let f = Family::ALL[f];
        let c = cluster(f, seed);
        let (r, s) = (Rules::compile(&c), State::new(&c));
        let o = options();
        let p = plan(&c, &r, &s, &placer(), &o).unwrap();
        prop_assert!(replay(&c, &r, &s, &placer(), &p.migrations).is_ok());
        if p.migrations.is_empty() {
            return Ok(());
        }
        let goal = Goal::of_plan(&c, &p, &o);
        if let Ok(best) = fewest_migrations(&c, &r, &s, &placer(), &goal, p.migrations.len(), BASELINE) {
            prop_assert!(replay(&c, &r, &s, &placer(), &best.migrations(&c)).is_ok());
            prop_assert!(best.migrations <= p.migrations.len());
            if let Some(k) = p.bounds.migrations {
                prop_assert!(k <= best.floor, "{} #{seed}: bound {k} > floor {}", f.name(), best.floor);
            }
            if let (Some(b), true) = (p.bounds.bytes, best.exact) {
                prop_assert!(b <= best.bytes, "{} #{seed}: bound {b} B > {} B", f.name(), best.bytes);
            }
        }
    }
}
