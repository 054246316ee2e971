//! Times pve_crs start scoring (Proxmox's O(N²) reference against flxp's O(N) evaluation) and
//! single-move balancing (bruteforce and TOPSIS) on divan.
//!
//! Run: `cargo bench -p flxp-core --bench pve_crs` (a name filter such as `-- start_fast` measures
//! only that function).
use divan::{Bencher, black_box};

use flxp_core::pve_crs::*;
use flxp_core::units::GIB;

fn main() {
    divan::main();
}

/// Node counts of the start-scoring table.
const NODES: &[usize] = &[3, 8, 32, 128, 1024];

/// Resources of the single-move table (on `nodes_for(r)` nodes).
const RESOURCES: &[usize] = &[10, 100, 1000];

fn cluster(n: usize) -> Vec<NodeUsage> {
    (0..n)
        .map(|i| {
            let f = i as f64;
            let maxcpu = 16.0 + (i % 4) as f64 * 16.0;
            let maxmem = (64 + (i as u64 % 3) * 64) * GIB;
            NodeUsage::new(
                format!("node{i:04}"),
                NodeStats {
                    cpu: (f * 0.618).fract() * maxcpu,
                    maxcpu,
                    mem: ((f * 0.377).fract() * maxmem as f64) as u64,
                    maxmem,
                },
            )
        })
        .collect()
}

fn vm() -> ResourceStats {
    ResourceStats {
        cpu: 0.0,
        maxcpu: 4.0,
        mem: 0,
        maxmem: 8 * GIB,
    }
}

/// Start scoring per decision, Proxmox's evaluation.
#[divan::bench(args = NODES)]
fn start_reference(bencher: Bencher, n: usize) {
    let nodes = cluster(n);
    let vm = vm();
    bencher.bench_local(|| {
        score_nodes_to_start_reference(black_box(&nodes), &vm).expect("synthetic stats are valid")
    });
}

/// Start scoring per decision, flxp's O(N) evaluation (the same scores within 1e-12).
#[divan::bench(args = NODES)]
fn start_fast(bencher: Bencher, n: usize) {
    let nodes = cluster(n);
    let vm = vm();
    bencher.bench_local(|| {
        score_nodes_to_start_fast(black_box(&nodes), &vm).expect("synthetic stats are valid")
    });
}

/// The node count that goes with `r` resources in the single-move table.
fn nodes_for(r: usize) -> usize {
    match r {
        0..=10 => 3,
        11..=100 => 10,
        _ => 50,
    }
}

/// Every move of `r` resources to every other node: R*(N-1) candidates.
fn candidates(r: usize, nodes: &[NodeUsage]) -> Vec<MigrationCandidate> {
    let n = nodes.len();
    let mut out = Vec::new();
    for i in 0..r {
        let source = i % n;
        for (t, target) in nodes.iter().enumerate() {
            if t != source {
                out.push(MigrationCandidate {
                    migration: CrsMigration::new(
                        format!("vm:{}", 100 + i),
                        nodes[source].name.clone(),
                        target.name.clone(),
                    ),
                    stats: ResourceStats {
                        cpu: 0.5,
                        maxcpu: 2.0,
                        mem: 2 * GIB,
                        maxmem: 4 * GIB,
                    },
                });
            }
        }
    }
    out
}

/// Single-move balancing, Proxmox's bruteforce ranking of every candidate.
#[divan::bench(args = RESOURCES)]
fn move_bruteforce(bencher: Bencher, r: usize) {
    let nodes = cluster(nodes_for(r));
    let candidates = candidates(r, &nodes);
    bencher
        .bench_local(|| rank_bruteforce(&nodes, &candidates).expect("synthetic stats are valid"));
}

/// Single-move balancing, Proxmox's TOPSIS ranking of every candidate.
#[divan::bench(args = RESOURCES)]
fn move_topsis(bencher: Bencher, r: usize) {
    let nodes = cluster(nodes_for(r));
    let candidates = candidates(r, &nodes);
    bencher.bench_local(|| rank_topsis(&nodes, &candidates).expect("synthetic stats are valid"));
}
