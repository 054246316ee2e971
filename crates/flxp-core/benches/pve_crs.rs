//! Times pve_crs start scoring (reference O(N²) vs fast O(N)) and single-move balancing.
//!
//! Run: `cargo bench -p flxp-core --bench pve_crs`.
use std::hint::black_box;
use std::time::{Duration, Instant};

use flxp_core::pve_crs::*;

use flxp_core::units::GIB;

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

/// Mean time per call, repeating for at least 200 ms.
fn time(mut f: impl FnMut()) -> Duration {
    let start = Instant::now();
    let mut runs = 0u32;
    while start.elapsed() < Duration::from_millis(200) {
        f();
        runs += 1;
    }
    start.elapsed() / runs
}

fn main() {
    let vm = ResourceStats {
        cpu: 0.0,
        maxcpu: 4.0,
        mem: 0,
        maxmem: 8 * GIB,
    };
    println!("start scoring, per decision (N nodes):");
    println!(
        "{:>6} {:>14} {:>14} {:>8}",
        "N", "reference", "fast", "ratio"
    );
    for n in [3, 5, 8, 16, 24, 32, 48, 64, 128, 256, 1024] {
        let nodes = cluster(n);
        let r = time(|| {
            black_box(
                score_nodes_to_start_reference(black_box(&nodes), &vm)
                    .expect("synthetic stats are valid"),
            );
        });
        let f = time(|| {
            black_box(
                score_nodes_to_start_fast(black_box(&nodes), &vm)
                    .expect("synthetic stats are valid"),
            );
        });
        println!(
            "{n:>6} {:>14?} {:>14?} {:>8.2}",
            r,
            f,
            r.as_secs_f64() / f.as_secs_f64()
        );
    }
    println!("single-move balancing, R resources on N nodes, R*(N-1) candidates:");
    for (r, n) in [(10, 3), (100, 10), (1000, 50)] {
        let nodes = cluster(n);
        let mut candidates = Vec::new();
        for i in 0..r {
            let source = i % n;
            for t in 0..n {
                if t != source {
                    candidates.push(MigrationCandidate {
                        migration: CrsMigration::new(
                            format!("vm:{}", 100 + i),
                            nodes[source].name.clone(),
                            nodes[t].name.clone(),
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
        let b = time(|| {
            black_box(rank_bruteforce(&nodes, &candidates).expect("synthetic stats are valid"));
        });
        let t = time(|| {
            black_box(rank_topsis(&nodes, &candidates).expect("synthetic stats are valid"));
        });
        println!(
            "  R={r:<5} N={n:<3} C={:<6} bruteforce {:>12?}  topsis {:>12?}",
            candidates.len(),
            b,
            t
        );
    }
}
