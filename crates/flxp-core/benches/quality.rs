//! Plan quality against an exact baseline on small generated clusters.
//!
//! For each family of `balance::exact::Family` (4–6 nodes, 10–16 VMs; medium 7–9 nodes, 20–36
//! VMs) and each seed, flxp plans
//! with default options and a budget of 50; the exact search then finds the fewest migrations (and
//! among them the fewest bytes) that reach the same imbalance with no more broken rules and the
//! same nodes in maintenance emptied, every step safe. Prints per family the mean and worst ratio
//! of flxp's migrations and bytes to the optimum, and of flxp's plan to its reported lower bound.
//!
//! With `big`, the families of `Family::BIG` instead (4–8 nodes and 60–130 guests; 16 nodes and
//! 700–800 guests), past the exact search's reach: the reference there is the CP-SAT model of
//! `scripts/quality-cpsat.py` (final placement only, so a lower bound on every safe plan), run
//! by the Python of `target/cpsat-venv` (or `FLXP_CPSAT_PYTHON`) for `cpsat-secs=S` per cluster
//! (default 20); its optimum proven or not is counted in the table.
//!
//! Run: `cargo bench -p flxp-core --features exact --bench quality` (`seeds=N`, default 12;
//! `family=NAME` only that family; `verbose` each cluster; `move-cost-gib=X`, `effort=S` and
//! `no-prune` change the planner's options; `big` the larger families against CP-SAT).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use flxp_core::balance::exact::{Family, Goal, fewest_migrations};
use flxp_core::balance::measure::balanced_nodes;
use flxp_core::balance::{BalanceOptions, plan, replay};
use flxp_core::constraints::GroupKind;
use flxp_core::placement::{PlacementOptions, Placer};
use flxp_core::{Cluster, Overrides, Rules, State};
use serde_json::json;

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
    /// Clusters whose reference is proven the fewest (CP-SAT only).
    proven: usize,
    /// Most CPU time of one plan, seconds (CP-SAT families only).
    slowest_cpu: f64,
}

impl Sums {
    /// Adds one family's figures to a total.
    fn add(&mut self, s: Sums) {
        self.clusters += s.clusters;
        self.compared += s.compared;
        self.unsolved += s.unsolved;
        self.proven += s.proven;
        self.flxp += s.flxp;
        self.best += s.best;
        self.moves.extend(s.moves);
        self.bytes.extend(s.bytes);
        self.gap.extend(s.gap);
        self.slowest = self.slowest.max(s.slowest);
        self.slowest_cpu = self.slowest_cpu.max(s.slowest_cpu);
    }
}

/// CPU time this thread has used, in seconds (Linux; 0 elsewhere): the plan's own cost, whatever
/// else runs on the machine.
fn cpu_secs() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/thread-self/stat") else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces) closed by ')': utime and stime are
    // the 12th and 13th of them, in clock ticks (100 a second on Linux).
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (tick(11) + tick(12)) / 100.0
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
    if args.iter().any(|a| a == "big") {
        let secs: f64 = args
            .iter()
            .find_map(|a| a.strip_prefix("cpsat-secs=").and_then(|n| n.parse().ok()))
            .unwrap_or(20.0);
        big(seeds, verbose, secs, &wanted, &placer, &options);
        return;
    }
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
        all.add(s);
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
    println!("{}", line(name, s, &s.unsolved.to_string()));
}

/// One table row's text, with `tenth` in the tenth column.
fn line(name: &str, s: &Sums, tenth: &str) -> String {
    format!(
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
        tenth,
        1000.0 * s.slowest
    )
}

/// The larger families against the CP-SAT reference.
fn big(
    seeds: u64,
    verbose: bool,
    secs: f64,
    wanted: &dyn Fn(&Family) -> bool,
    placer: &Placer,
    options: &BalanceOptions,
) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = std::env::var_os("FLXP_CPSAT_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/cpsat-venv/bin/python"));
    let script = root.join("scripts/quality-cpsat.py");
    println!("## Plan quality against CP-SAT ({seeds} clusters per family, {secs} s each)\n");
    println!(
        "| family | clusters that move | flxp migrations | fewest | migrations ÷ fewest, mean | worst | bytes ÷ fewest, mean | worst | migrations ÷ reported bound, mean | reference proven | slowest plan | most CPU |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let started = Instant::now();
    let mut all = Sums::default();
    for f in Family::BIG.into_iter().filter(|f| wanted(f)) {
        let mut s = Sums::default();
        for seed in 1..=seeds {
            let c = Cluster::from_snapshot(&f.generate(seed), &Overrides::default())
                .expect("generated snapshot");
            let (rules, state) = (Rules::compile(&c), State::new(&c));
            let (t, cpu) = (Instant::now(), cpu_secs());
            let p = plan(&c, &rules, &state, placer, options).expect("plan");
            let took = t.elapsed().as_secs_f64();
            let cpu = cpu_secs() - cpu;
            s.slowest = s.slowest.max(took);
            s.slowest_cpu = s.slowest_cpu.max(cpu);
            let end = replay(&c, &rules, &state, placer, &p.migrations).expect("plan replays");
            s.clusters += 1;
            if p.migrations.is_empty() {
                continue;
            }
            let goal = Goal::of_plan(&c, &p, options);
            let problem = problem(&c, &rules, (&state, &end), &goal, secs);
            let Some((fewest, bytes, proven)) = cpsat(&python, &script, &problem, f, seed) else {
                s.unsolved += 1;
                continue;
            };
            if verbose {
                eprintln!(
                    "{} #{seed}: {} nodes, {} guests: flxp {} ({} B), CP-SAT {fewest} ({bytes} B{}), bound {:?}, plan {:.1} ms ({:.2} s CPU)",
                    f.name(),
                    c.nodes().len(),
                    c.guests().len(),
                    p.migrations.len(),
                    p.bytes,
                    if proven { ", proven" } else { "" },
                    p.bounds.migrations,
                    1000.0 * took,
                    cpu
                );
            }
            s.compared += 1;
            s.proven += usize::from(proven);
            s.flxp += p.migrations.len();
            s.best += fewest;
            s.moves
                .push(p.migrations.len() as f64 / fewest.max(1) as f64);
            if bytes > 0 {
                s.bytes.push(p.bytes as f64 / bytes as f64);
            }
            if let Some(g) = p.bounds.migrations_gap {
                s.gap.push(g);
            }
            if let (Some(k), true) = (p.bounds.migrations, proven) {
                assert!(
                    k <= fewest,
                    "{} #{seed}: bound {k} above the optimum {fewest}",
                    f.name()
                );
            }
        }
        big_row(f.name(), &s);
        all.add(s);
    }
    big_row("**all**", &all);
    println!("\n({:.1} s.)", started.elapsed().as_secs_f64());
}

/// The CP-SAT model's input (see `scripts/quality-cpsat.py`): every running guest on a balanced
/// node may move to any balanced node its hard node rules allow (more freedom than the planner
/// has, so the optimum stays a lower bound); hard anti-affinity holds when the goal leaves no
/// rule broken. flxp's final placement `end` is the solver's first hint.
fn problem(
    c: &Cluster,
    rules: &Rules,
    (state, end): (&State, &State),
    goal: &Goal,
    secs: f64,
) -> serde_json::Value {
    const KIB: u64 = 1024;
    let nodes: Vec<_> = balanced_nodes(c).collect();
    let at = |n| nodes.iter().position(|&m| m == n);
    assert!(
        goal.must_leave.is_empty(),
        "no family has a node in maintenance"
    );
    let mut guests = Vec::new();
    let mut pos = vec![None; c.guests().len()];
    for (i, g) in c.guests().iter().enumerate() {
        let idx = c.guest_idx(g.vmid).expect("its own guest");
        let Some(here) = at(state.location(idx)) else {
            continue;
        };
        if !g.running {
            continue;
        }
        let r = rules.guest(idx);
        let fits = |n| r.allows(n) && r.selectors.iter().all(|l| c.node(n).labels.contains(l));
        let targets: Vec<usize> = (0..nodes.len())
            .filter(|&j| j != here && fits(nodes[j]))
            .collect();
        pos[i] = Some(guests.len());
        guests.push(json!({
            "node": here,
            "mem": g.mem_footprint() / KIB,
            "bytes": g.move_bytes(),
            "targets": targets,
            "stay": goal.violations > 0 || fits(nodes[here]),
            "hint": at(end.location(idx)),
        }));
    }
    let mut apart = Vec::new();
    if goal.violations == 0 {
        for grp in &rules.groups {
            if grp.kind != GroupKind::AntiAffinity || !grp.hard {
                continue;
            }
            let members: Vec<_> = grp
                .members
                .iter()
                .filter_map(|&g| match pos[g.get()] {
                    Some(k) => Some(json!({ "guest": k })),
                    None => at(state.location(g)).map(|n| json!({ "node": n })),
                })
                .collect();
            apart.push(members);
        }
    }
    let nodes: Vec<_> = nodes
        .iter()
        .map(|&n| json!({ "maxmem": c.node(n).maxmem / KIB, "mem": state.usage(n).mem / KIB }))
        .collect();
    json!({ "nodes": nodes, "guests": guests, "apart": apart, "imbalance": goal.imbalance, "seconds": secs })
}

/// Runs the CP-SAT model: the fewest migrations, their bytes, and whether proven.
fn cpsat(
    python: &Path,
    script: &Path,
    problem: &serde_json::Value,
    f: Family,
    seed: u64,
) -> Option<(usize, u64, bool)> {
    // Kept under target/ to re-run one by hand: `PYTHON scripts/quality-cpsat.py FILE`.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/quality-cpsat");
    std::fs::create_dir_all(&dir).expect("target/quality-cpsat");
    let file = dir.join(format!("{}-{seed}.json", f.name().replace(' ', "-")));
    std::fs::write(&file, problem.to_string()).expect("problem file");
    let out = Command::new(python)
        .arg(script)
        .arg(&file)
        .output()
        .expect("the CP-SAT script runs (see scripts/quality-cpsat.py for its venv)");
    let text = String::from_utf8_lossy(&out.stdout);
    let words: Vec<&str> = text.split_whitespace().collect();
    match words.as_slice() {
        [m, b, status, _bound] => Some((m.parse().ok()?, b.parse().ok()?, *status == "OPTIMAL")),
        _ => {
            eprintln!(
                "{} #{seed}: CP-SAT gave no plan: {text}{}",
                f.name(),
                String::from_utf8_lossy(&out.stderr)
            );
            None
        }
    }
}

/// One table row of the CP-SAT comparison: the exact baseline's row, with how many references
/// are proven in place of the unsolved, and the most CPU one plan took.
fn big_row(name: &str, s: &Sums) {
    println!(
        "{}",
        line(name, s, &format!("{} of {}", s.proven, s.compared))
            + &format!(" {:.2} s |", s.slowest_cpu)
    );
}
