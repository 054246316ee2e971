//! Placement decisions on concrete clusters, under each policy, with explanations.

use flxp_core::builder::*;
use flxp_core::placement::{PlacementOptions, PlacementRequest, Placer, Policy};
use flxp_core::{Cluster, Rules, State};

use crate::support;

fn place(c: &Cluster, req: PlacementRequest) -> flxp_core::placement::Placement {
    place_with(c, req, PlacementOptions::default())
}

fn place_with(
    c: &Cluster,
    req: PlacementRequest,
    opts: PlacementOptions,
) -> flxp_core::placement::Placement {
    let rules = Rules::compile(c);
    let state = State::new(c);
    Placer::new(opts, Vec::new())
        .unwrap()
        .place(c, &rules, &state, &req)
        .unwrap()
}

fn req(memory: u64, cores: impl Into<f64>, tags: &[&str]) -> PlacementRequest {
    PlacementRequest {
        memory,
        cores: cores.into(),
        tags: tags.iter().map(|t| (*t).to_owned()).collect(),
        ..PlacementRequest::default()
    }
}

/// pve1 busy and big, pve2 medium, pve3 small and idle, pve4 offline.
fn mixed() -> Cluster {
    ClusterBuilder::new()
        .node(
            node("pve1")
                .memory(128 * GIB)
                .used(100 * GIB)
                .cpus(32.0)
                .load(0.2),
        )
        .node(
            node("pve2")
                .memory(64 * GIB)
                .used(30 * GIB)
                .cpus(16.0)
                .load(0.6),
        )
        .node(
            node("pve3")
                .memory(32 * GIB)
                .used(4 * GIB)
                .cpus(8.0)
                .load(0.1),
        )
        .node(node("pve4").offline())
        .guest(vm(101, "pve1"))
        .guest(vm(102, "pve1"))
        .guest(vm(103, "pve1"))
        .guest(vm(104, "pve2"))
        .guest(vm(105, "pve3"))
        .guest(vm(106, "pve3"))
        .build()
}

#[test]
fn default_policy_picks_the_most_available_memory() {
    // Available: pve1 28, pve2 34, pve3 28 GiB.
    let p = place(&mixed(), req(4 * GIB, 2, &[]));
    assert_eq!(p.node.as_deref(), Some("pve2"));
    assert_eq!(p.policy, "free-memory");
    let names: Vec<&str> = p.candidates.iter().map(|c| c.node.as_str()).collect();
    assert_eq!(
        names,
        ["pve2", "pve1", "pve3", "pve4"],
        "feasible best first, ties by name, then infeasible"
    );
    assert_eq!(p.candidates[0].scores["free-memory"], 100.0);
    assert_eq!(p.candidates[3].reasons, ["online: node is offline"]);
}

#[test]
fn a_scored_candidate_gives_each_share_with_its_weight_in_the_policy() {
    let p = place(&mixed(), req(4 * GIB, 2, &[]));
    let policy = Policy::builtin(&p.policy).unwrap();
    for c in &p.candidates {
        let shares = c.shares();
        assert_eq!(shares.len(), c.scores.len(), "{c:?}");
        for s in shares {
            assert_eq!(s.score, c.scores[&s.scorer]);
            assert_eq!(Some(&s.weight), policy.weights.get(&s.scorer), "{s:?}");
        }
    }
    assert!(!p.candidates[0].shares().is_empty());
}

#[test]
fn each_builtin_policy_picks_its_node() {
    let c = mixed();
    let pick = |policy: &str| {
        let mut r = req(4 * GIB, 2, &[]);
        r.policy = Some(policy.into());
        place(&c, r).node.unwrap()
    };
    assert_eq!(pick("free-memory"), "pve2");
    // Idle cores after: pve1 32·0.8−2 = 23.6, pve2 16·0.4−2 = 4.4, pve3 8·0.9−2 = 5.2.
    assert_eq!(pick("free-cpu"), "pve1");
    // Running guests: pve1 3, pve2 1, pve3 2.
    assert_eq!(pick("spread"), "pve2");
    // Allocated after: pve1 104/128, pve2 34/64, pve3 8/32.
    assert_eq!(pick("pack"), "pve1");
}

#[test]
fn no_node_fits_is_a_decision_with_every_reason() {
    let p = place(&mixed(), req(40 * GIB, 64, &[]));
    assert_eq!(p.node, None);
    let pve3 = p.candidates.iter().find(|c| c.node == "pve3").unwrap();
    assert!(!pve3.feasible);
    assert_eq!(pve3.reasons.len(), 2, "{:?}", pve3.reasons);
    assert!(
        pve3.reasons[0].starts_with("memory: needs 40.0 GiB but 28.0 GiB is available"),
        "{:?}",
        pve3.reasons
    );
    assert!(
        pve3.reasons[1].starts_with("cpu: needs 64 vCPUs but the node has 8 CPUs"),
        "{:?}",
        pve3.reasons
    );
}

#[test]
fn ties_go_to_the_alphabetically_first_node() {
    let c = ClusterBuilder::new().nodes(&["c", "a", "b"]).build();
    assert_eq!(place(&c, req(GIB, 1, &[])).node.as_deref(), Some("a"));
}

#[test]
fn rules_filter_and_preferences_steer() {
    let c = ClusterBuilder::new()
        .node(node("pve1").notes("flxp.label.ssd"))
        .node(node("pve2").notes("flxp.label.ssd flxp.taint.gpu"))
        .node(node("pve3").memory(256 * GIB))
        .guest(vm(101, "pve1").tagged("flxp.anti-affinity.web"))
        .build();
    // pve3 has by far the most memory but lacks the label; pve1 holds a web member; pve2 is tainted.
    let p = place(
        &c,
        req(GIB, 1, &["flxp.select.ssd", "flxp.anti-affinity.web"]),
    );
    assert_eq!(p.node, None);
    let p = place(
        &c,
        req(
            GIB,
            1,
            &[
                "flxp.select.ssd",
                "flxp.anti-affinity.web",
                "flxp.tolerate.gpu",
            ],
        ),
    );
    assert_eq!(p.node.as_deref(), Some("pve2"));
    // A preference beats free memory.
    let p = place(&c, req(GIB, 1, &["flxp.prefer-node.pve1"]));
    assert_eq!(p.node.as_deref(), Some("pve1"));
    // A soft taint is avoided while something else fits.
    let c = ClusterBuilder::new()
        .node(node("big").memory(256 * GIB).notes("flxp.prefer-no.batch"))
        .node(node("small").memory(16 * GIB))
        .build();
    assert_eq!(place(&c, req(GIB, 1, &[])).node.as_deref(), Some("small"));
    assert_eq!(
        place(&c, req(32 * GIB, 1, &[])).node.as_deref(),
        Some("big"),
        "usable when nothing else fits"
    );
}

#[test]
fn a_named_host_skips_scoring_but_not_resources_and_turns_rules_into_warnings() {
    let c = mixed();
    let mut r = req(4 * GIB, 2, &["flxp.node.pve1"]);
    r.host = Some("pve3".into());
    let p = place(&c, r.clone());
    assert_eq!(p.node.as_deref(), Some("pve3"));
    assert_eq!(p.policy, "host");
    let w: Vec<String> = p.warnings.iter().map(ToString::to_string).collect();
    assert!(
        w.iter().any(|w| w.contains("node-rules")
            && w.ends_with("; placed there because it was named")),
        "{w:?}"
    );
    r.memory = 30 * GIB;
    let p = place(&c, r.clone());
    assert_eq!(p.node, None);
    assert!(p.candidates[0].reasons[0].starts_with("memory:"));
    // Nothing was placed, so no warning may say it was.
    let w: Vec<String> = p.warnings.iter().map(ToString::to_string).collect();
    assert!(
        w.iter().all(|w| !w.contains("placed there")
            && w.ends_with("not placed: the host fails the resource checks too")),
        "{w:?}"
    );
    r.memory = GIB;
    r.host = Some("pve4".into());
    assert_eq!(place(&c, r).node, None, "offline host is refused");
}

#[test]
fn reserve_and_caps_apply() {
    let c = mixed();
    let opts = PlacementOptions {
        reserve_bytes: 8 * GIB,
        ..PlacementOptions::default()
    };
    // Available with 8 GiB reserve: pve1 20, pve2 26, pve3 20; a 22 GiB VM fits only pve2.
    assert_eq!(
        place_with(&c, req(22 * GIB, 2, &[]), opts.clone())
            .node
            .as_deref(),
        Some("pve2")
    );
    assert_eq!(place_with(&c, req(27 * GIB, 2, &[]), opts).node, None);
}

#[test]
fn custom_policy_weights_mix_scorers() {
    let c = mixed();
    let p = Policy::custom(
        "cpu-heavy",
        [("free-cpu".into(), 3.0), ("free-memory".into(), 1.0)].into(),
    )
    .unwrap();
    let placer = Placer::new(PlacementOptions::default(), vec![p]).unwrap();
    let rules = Rules::compile(&c);
    let mut r = req(4 * GIB, 2, &[]);
    r.policy = Some("cpu-heavy".into());
    let d = placer.place(&c, &rules, &State::new(&c), &r).unwrap();
    assert_eq!(d.node.as_deref(), Some("pve1"));
    let top = &d.candidates[0];
    let want = (3.0 * top.scores["free-cpu"] + top.scores["free-memory"]) / 4.0;
    assert!((top.score.unwrap() - want).abs() < 0.01, "{top:?}");
}

#[test]
fn bad_requests_are_errors_naming_the_problem() {
    let c = mixed();
    let rules = Rules::compile(&c);
    let placer = support::placer();
    let s = State::new(&c);
    let e = placer
        .place(&c, &rules, &s, &req(0, 1, &[]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("memory"), "{e}");
    let e = placer
        .place(&c, &rules, &s, &req(GIB, 1, &["bad/tag"]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("bad/tag"), "{e}");
    // u64::MAX bytes would overflow a node's committed-memory sum: refused up front.
    let e = placer
        .place(&c, &rules, &s, &req(u64::MAX, 1, &[]))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "invalid request: memory 18446744073709551615 bytes is more than 1.0 PiB \
         (no machine has that much memory)"
    );
    let mut r = req(GIB, 1, &[]);
    r.policy = Some("fastest".into());
    let e = placer.place(&c, &rules, &s, &r).unwrap_err().to_string();
    assert!(
        e.contains("unknown policy \"fastest\"") && e.contains("free-memory"),
        "{e}"
    );
    r.policy = None;
    r.host = Some("pve9".into());
    let e = placer.place(&c, &rules, &s, &r).unwrap_err().to_string();
    assert!(e.contains("pve9") && e.contains("pve1, pve2"), "{e}");
}

#[test]
fn identical_nodes_tie_to_the_first_name_under_topsis_too() {
    // Float sums in another order once made zz win over its twin mm by a last-bit difference.
    let twin = |name: &str| {
        node(name)
            .memory(128 * GIB)
            .used(11_048_363_712)
            .cpus(24.0)
            .load(0.485)
    };
    let c = ClusterBuilder::new()
        .node(
            node("aa")
                .memory(256 * GIB)
                .used(247_390_116_249)
                .cpus(8.0)
                .load(0.9),
        )
        .node(
            node("bb")
                .memory(256 * GIB)
                .used(247_390_116_249)
                .cpus(48.0)
                .load(0.9),
        )
        .node(twin("mm"))
        .node(twin("zz"))
        .build();
    for policy in ["pve-dynamic"] {
        for cores in 1..=8 {
            let mut r = req(5 * GIB, cores, &[]);
            r.policy = Some(policy.into());
            let p = place(&c, r);
            assert_eq!(p.node.as_deref(), Some("mm"), "{policy}, {cores} cores");
        }
    }
}

#[test]
fn the_request_warnings_are_only_about_the_request() {
    let c = ClusterBuilder::new()
        .nodes(&["a", "b"])
        .guest(vm(101, "a").tagged("flxp.afinity.db"))
        .build();
    let p = place(&c, req(GIB, 1, &["flxp.afinity.web"]));
    let all: Vec<String> = p.warnings.iter().map(ToString::to_string).collect();
    let own: Vec<String> = p
        .request_warnings()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(all.iter().any(|w| w.contains("flxp.afinity.db")), "{all:?}");
    assert_eq!(own.len(), 1, "{own:?}");
    assert!(own[0].contains("flxp.afinity.web"), "{own:?}");
}
