//! Hostile input sizes: guests with tens of thousands to millions of tags, node notes with as
//! many tokens. Reading them (JSON, model, rules, status report and its JSON) must grow linearly:
//! anyone allowed to edit a guest's tags or a node's notes could otherwise stall every plan.
//!
//! Run: `cargo bench -p flxp-core --bench hostile` on divan: each size is its own row, and the
//! throughput column (items per second) stays flat when the time grows linearly; a name filter
//! such as `-- tags` measures only that input.

use divan::counter::ItemsCount;
use divan::{Bencher, black_box};

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

/// Items per input: tags on one guest, or tokens in one node's notes.
const SIZES: &[usize] = &[20_000, 80_000, 320_000, 4_000_000];

fn main() {
    divan::main();
}

/// One guest with `n` distinct tags, read from JSON to `flxp status --json`.
#[divan::bench(args = SIZES, sample_count = 3, sample_size = 1)]
fn tags_on_one_guest(bencher: Bencher, n: usize) {
    let json = snapshot(&tags(n), "");
    bencher
        .counter(ItemsCount::new(n))
        .bench_local(|| read(black_box(&json)));
}

/// One node whose notes hold `n` tokens, read from JSON to `flxp status --json`.
#[divan::bench(args = SIZES, sample_count = 3, sample_size = 1)]
fn notes_of_one_node(bencher: Bencher, n: usize) {
    let json = snapshot("", &notes(n));
    bencher
        .counter(ItemsCount::new(n))
        .bench_local(|| read(black_box(&json)));
}
