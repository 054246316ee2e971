//! Placement decisions per second on synthetic clusters of 32, 1,000 and 10,000 nodes with 30
//! guests per node, affinity groups and labels: on a prepared snapshot (model, rules and state
//! built once) and from raw JSON (parse, index, compile rules, decide).
//!
//! Run: `cargo bench -p flxp-core --bench placement` on divan; a name filter such as `-- fast`
//! measures only that path (e.g. under `perf record`), and each node count is its own row.

use divan::{Bencher, black_box};

use flxp_core::builder::*;
use flxp_core::placement::{Ctx, PlacementOptions, PlacementRequest, Placer, Subject};
use flxp_core::{Cluster, Overrides, Rules, Snapshot, State};

/// A cluster of `n` nodes, 30 guests each: every third guest in a 3-member anti-affinity group,
/// every tenth pair in an affinity group, half the nodes labelled `ssd`, one in twenty tainted.
fn synthetic(n: usize) -> Snapshot {
    let mut b = ClusterBuilder::new();
    let mut lcg = Lcg(42);
    let mut next = |m: u64| lcg.next(m);
    for i in 0..n {
        let mut notes = String::new();
        if i % 2 == 0 {
            notes.push_str("flxp.label.ssd ");
        }
        if i % 20 == 7 {
            notes.push_str("flxp.taint.gpu");
        }
        b = b.node(
            node(&format!("node{i:05}"))
                .memory((128 + 128 * (i as u64 % 3)) * GIB)
                .cpus(32.0)
                .notes(&notes),
        );
    }
    let mut vmid = 100;
    for i in 0..n {
        for j in 0..30 {
            let mut tags = Vec::new();
            if j % 3 == 0 {
                tags.push(format!(
                    "flxp.anti-affinity.g{}",
                    (vmid / 3) % (n as u32 * 3)
                ));
            }
            if j % 10 == 1 {
                tags.push(format!("flxp.affinity.pair{}", vmid / 10));
            }
            let mem = (1 + next(8)) * GIB;
            b = b.guest(
                vm(vmid, &format!("node{i:05}"))
                    .mem(mem / 2, mem)
                    .cores(2.0, 0.2)
                    .tagged(&tags.join(";")),
            );
            vmid += 1;
        }
    }
    b.snapshot()
}

fn request() -> PlacementRequest {
    PlacementRequest {
        memory: 4 * GIB,
        cores: 2.0,
        tags: vec!["flxp.anti-affinity.g7".into(), "flxp.select.ssd".into()],
        ..PlacementRequest::default()
    }
}

/// Node counts measured (30 guests per node).
const NODES: &[usize] = &[32, 1_000, 10_000];

fn main() {
    divan::main();
}

/// A cluster of `n` nodes with its rules, state and the default placer, built once per row.
struct Fixture {
    cluster: Cluster,
    rules: Rules,
    state: State,
    placer: Placer,
}

impl Fixture {
    fn new(n: usize) -> Self {
        let cluster = Cluster::from_snapshot(&synthetic(n), &Overrides::default())
            .expect("valid synthetic cluster");
        let rules = Rules::compile(&cluster);
        let state = State::new(&cluster);
        let placer = Placer::new(PlacementOptions::default(), Vec::new()).expect("default placer");
        Self {
            cluster,
            rules,
            state,
            placer,
        }
    }
}

/// `Placer::place`, what `flxp place --json` and the `placement` query return: every node's
/// verdict, every refusal as text, every scorer's share.
#[divan::bench(args = NODES, sample_count = 30)]
fn explained(bencher: Bencher, n: usize) {
    let f = Fixture::new(n);
    let req = request();
    bencher.bench_local(|| {
        f.placer
            .place(&f.cluster, &f.rules, &f.state, &req)
            .expect("decision")
    });
}

/// `Placer::best`, the decision without explanations (what the planner uses per step).
#[divan::bench(args = NODES, sample_count = 30)]
fn fast(bencher: Bencher, n: usize) {
    let f = Fixture::new(n);
    let (subject, _) = Subject::new_vm(&f.cluster, &f.rules, &request()).expect("subject");
    bencher.bench_local(|| {
        let ctx = Ctx::new(&f.cluster, &f.rules, &f.state, f.placer.options(), &subject);
        f.placer.best(&ctx, None).expect("decision")
    });
}

/// `Placer::place` under the `pve-static` policy (Proxmox's TOPSIS over configured sizes).
#[divan::bench(args = NODES, sample_count = 30)]
fn pve_static(bencher: Bencher, n: usize) {
    let f = Fixture::new(n);
    let mut req = request();
    req.policy = Some("pve-static".into());
    bencher.bench_local(|| {
        f.placer
            .place(&f.cluster, &f.rules, &f.state, &req)
            .expect("decision")
    });
}

/// Parse the snapshot's JSON, build the model and its indexes, compile the rules, decide.
#[divan::bench(args = NODES, sample_count = 5)]
fn raw_json(bencher: Bencher, n: usize) {
    let json = serde_json::to_string(&synthetic(n)).expect("a snapshot serializes");
    let placer = Placer::new(PlacementOptions::default(), Vec::new()).expect("default placer");
    let req = request();
    bencher.bench_local(|| {
        let c = Cluster::from_json(black_box(&json), &Overrides::default()).expect("valid json");
        let r = Rules::compile(&c);
        let s = State::new(&c);
        placer.place(&c, &r, &s, &req).expect("decision")
    });
}
