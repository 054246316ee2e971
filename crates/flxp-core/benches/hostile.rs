//! Hostile input sizes: guests with tens of thousands to millions of tags, node notes with as
//! many tokens. Reading them (JSON, model, rules, status report and its JSON) must grow linearly:
//! anyone allowed to edit a guest's tags or a node's notes could otherwise stall every plan.
//!
//! Run: `cargo bench -p flxp-core --bench hostile` (add sizes such as `-- 20000 80000` to measure
//! only those; the default is 20,000, 80,000, 320,000 and 4,000,000).

use std::hint::black_box;
use std::time::{Duration, Instant};

use flxp_core::status::status;
use flxp_core::{Cluster, Overrides, Rules, State};

const GIB: u64 = 1 << 30;

/// Four nodes; `notes` on the first, and guest 101 on it with `tags`.
fn snapshot(tags: &str, notes: &str) -> String {
    let node = |n: &str| {
        format!(
            r#"{{"id":"node/{n}","type":"node","node":"{n}","status":"online","maxmem":{},"mem":{},"maxcpu":16,"cpu":0.1}}"#,
            64 * GIB,
            8 * GIB
        )
    };
    let guest = format!(
        r#"{{"id":"qemu/101","type":"qemu","vmid":101,"node":"n0","status":"running","maxmem":{},"mem":{},"maxcpu":2,"cpu":0.1,"tags":{}}}"#,
        4 * GIB,
        2 * GIB,
        serde_json::to_string(tags).unwrap_or_default()
    );
    format!(
        r#"{{"resources":[{},{},{},{},{guest}],"nodes":{{"n0":{{"notes":{}}}}}}}"#,
        node("n0"),
        node("n1"),
        node("n2"),
        node("n3"),
        serde_json::to_string(notes).unwrap_or_default()
    )
}

/// `n` tags of four kinds in turn: someone else's, an anti-affinity group, an unknown flxp tag,
/// a selector; all distinct.
fn tags(n: usize) -> String {
    let mut out = String::with_capacity(n * 24);
    for i in 0..n {
        if i > 0 {
            out.push(';');
        }
        out.push_str(&match i % 4 {
            0 => format!("other{i}"),
            1 => format!("flxp.anti-affinity.g{i}"),
            2 => format!("flxp.bogus{i}"),
            _ => format!("flxp.select.l{i}"),
        });
    }
    out
}

/// `n` notes tokens: labels, taints and unknown tokens in turn.
fn notes(n: usize) -> String {
    let mut out = String::with_capacity(n * 20);
    for i in 0..n {
        out.push_str(&match i % 3 {
            0 => format!("flxp.label.l{i} "),
            1 => format!("flxp.taint.t{i} "),
            _ => format!("flxp.bogus{i} "),
        });
    }
    out
}

/// Reads the snapshot as `flxp status --json` does; returns the report's JSON length.
fn read(json: &str) -> usize {
    let c = Cluster::from_json(json, &Overrides::default()).expect("valid snapshot");
    let r = Rules::compile(&c);
    let s = State::new(&c);
    serde_json::to_string(&status(&c, &r, &s))
        .unwrap_or_default()
        .len()
}

/// The best of `runs` timings of `read`, and the report's length.
fn best(json: &str, runs: usize) -> (Duration, usize) {
    let mut best = Duration::MAX;
    let mut len = 0;
    for _ in 0..runs {
        let start = Instant::now();
        len = black_box(read(black_box(json)));
        best = best.min(start.elapsed());
    }
    (best, len)
}

fn main() {
    let sizes: Vec<usize> = std::env::args().filter_map(|a| a.parse().ok()).collect();
    let sizes = if sizes.is_empty() {
        vec![20_000, 80_000, 320_000, 4_000_000]
    } else {
        sizes
    };
    println!("snapshot → model → rules → status JSON, one core, best of 3 runs (1 at 1 M and up)");
    println!(
        "{:>10} {:>12} {:>10} {:>10} {:>12} {:>10} {:>10} {:>10}",
        "items", "tags MiB", "tags ms", "ns/tag", "notes MiB", "notes ms", "ns/token", "report KiB"
    );
    for n in sizes {
        let runs = if n >= 1_000_000 { 1 } else { 3 };
        let tagged = snapshot(&tags(n), "");
        let (t, len) = best(&tagged, runs);
        let noted = snapshot("", &notes(n));
        let (u, len2) = best(&noted, runs);
        println!(
            "{:>10} {:>12.1} {:>10.1} {:>10.0} {:>12.1} {:>10.1} {:>10.0} {:>10.1}",
            n,
            tagged.len() as f64 / f64::from(1 << 20),
            t.as_secs_f64() * 1e3,
            t.as_secs_f64() * 1e9 / n as f64,
            noted.len() as f64 / f64::from(1 << 20),
            u.as_secs_f64() * 1e3,
            u.as_secs_f64() * 1e9 / n as f64,
            len.max(len2) as f64 / 1024.0
        );
    }
}
