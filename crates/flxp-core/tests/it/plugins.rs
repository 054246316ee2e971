//! External plugins through a fake transport: filters, scores and balance proposals, failure
//! policies, and the property that no accepted balance proposal is an unsafe step.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use flxp_core::balance::{BalanceOptions, Registry, replay};
use flxp_core::builder::*;
use flxp_core::placement::{PlacementOptions, PlacementRequest, Placer, Policy};
use flxp_core::plugin::{
    CallError, OnFailure, PluginHost, PluginKind, PluginSpec, Plugins, Request,
};
use flxp_core::{Cluster, Error, Rules, State};
use proptest::prelude::*;

use crate::support::{self, migrating};

type Answer = dyn Fn(&Request) -> Result<Vec<u8>, CallError> + Send + Sync;

struct Fake {
    answer: Box<Answer>,
    calls: AtomicUsize,
}

impl PluginHost for Fake {
    fn call(&self, _plugin: &str, request: &Request) -> Result<Vec<u8>, CallError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        (self.answer)(request)
    }
}

fn fake(
    answer: impl Fn(&Request) -> Result<Vec<u8>, CallError> + Send + Sync + 'static,
) -> Arc<Fake> {
    Arc::new(Fake {
        answer: Box::new(answer),
        calls: AtomicUsize::new(0),
    })
}

fn placer(specs: Vec<PluginSpec>, host: Arc<Fake>, policies: Vec<Policy>) -> Placer {
    Placer::with_plugins(
        PlacementOptions::default(),
        policies,
        Plugins::new(specs, host),
    )
    .unwrap()
}

fn three_nodes() -> Cluster {
    ClusterBuilder::new()
        .node(node("a").memory(64 * GIB))
        .node(node("b").memory(32 * GIB))
        .node(node("c").memory(16 * GIB).offline())
        .build()
}

fn request(policy: Option<&str>) -> PlacementRequest {
    PlacementRequest {
        memory: 2 * GIB,
        cores: 1.0,
        policy: policy.map(str::to_owned),
        ..PlacementRequest::default()
    }
}

/// A filter answer refusing `a`, allowing every other candidate.
fn refuse_a(r: &Request) -> Result<Vec<u8>, CallError> {
    let nodes: Vec<serde_json::Value> = r
        .nodes
        .iter()
        .map(|n| serde_json::json!({"node": n.name, "allowed": n.name != "a", "reason": "no licence"}))
        .collect();
    Ok(
        serde_json::to_vec(&serde_json::json!({"protocol": 1, "kind": "filter", "nodes": nodes}))
            .unwrap(),
    )
}

#[test]
fn a_filter_plugin_is_called_once_with_the_feasible_nodes_and_its_refusals_are_explained() {
    let c = three_nodes();
    let host = fake(|r| {
        // Only nodes that passed flxp's own filters are asked about (c is offline).
        let names: Vec<&str> = r.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(r.guest.as_ref().unwrap().memory, 2 * GIB);
        refuse_a(r)
    });
    let spec = PluginSpec::new("licences", PluginKind::Filter, OnFailure::Fail);
    let p = placer(vec![spec], Arc::clone(&host), Vec::new());
    let d = p
        .place(&c, &Rules::compile(&c), &State::new(&c), &request(None))
        .unwrap();
    assert_eq!(d.node.as_deref(), Some("b"));
    assert_eq!(host.calls.load(Ordering::SeqCst), 1);
    let a = d.candidates.iter().find(|x| x.node == "a").unwrap();
    assert!(!a.feasible);
    assert_eq!(a.reasons, ["licences: no licence"]);
}

#[test]
fn a_score_plugin_in_a_policy_weighs_like_a_scorer_and_shows_its_share_per_node() {
    let c = three_nodes();
    // The plugin prefers b (cheaper power), enough to beat a's free memory at weight 3.
    let host = fake(|r| {
        let scores: Vec<serde_json::Value> = r
            .nodes
            .iter()
            .map(|n| serde_json::json!({"node": n.name, "score": if n.name == "b" { 10.0 } else { 0.0 }}))
            .collect();
        Ok(serde_json::to_vec(
            &serde_json::json!({"protocol": 1, "kind": "score", "scores": scores}),
        )
        .unwrap())
    });
    let spec = PluginSpec::new("price", PluginKind::Score, OnFailure::Fail);
    let weights: BTreeMap<String, f64> =
        [("free-memory".to_owned(), 1.0), ("price".to_owned(), 3.0)].into();
    let policy = Policy::custom_with("cheap", weights, &["price"]).unwrap();
    let p = placer(vec![spec], Arc::clone(&host), vec![policy]);
    let d = p
        .place(
            &c,
            &Rules::compile(&c),
            &State::new(&c),
            &request(Some("cheap")),
        )
        .unwrap();
    assert_eq!(d.node.as_deref(), Some("b"));
    let b = d.candidates.iter().find(|x| x.node == "b").unwrap();
    assert_eq!(b.scores["price"], 100.0);
    let a = d.candidates.iter().find(|x| x.node == "a").unwrap();
    assert_eq!(a.scores["price"], 0.0);
    assert_eq!(host.calls.load(Ordering::SeqCst), 1);
    // Other policies do not call it.
    p.place(&c, &Rules::compile(&c), &State::new(&c), &request(None))
        .unwrap();
    assert_eq!(host.calls.load(Ordering::SeqCst), 1);
    // An unknown name is still refused, with the plugins among the known ones.
    let e = Policy::custom_with("x", [("prize".to_owned(), 1.0)].into(), &["price"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("policies.x.prize") && e.contains("price"), "{e}");
}

#[test]
fn a_failing_plugin_is_ignored_with_a_warning_or_refuses_the_decision() {
    let c = three_nodes();
    let lying = |r: &Request| {
        let _ = r;
        Ok(br#"{"protocol":1,"kind":"filter","nodes":[{"node":"zz","allowed":true}]}"#.to_vec())
    };
    let rules = Rules::compile(&c);
    let state = State::new(&c);
    let ignore = placer(
        vec![PluginSpec::new(
            "lic",
            PluginKind::Filter,
            OnFailure::Ignore,
        )],
        fake(lying),
        Vec::new(),
    );
    let d = ignore.place(&c, &rules, &state, &request(None)).unwrap();
    assert_eq!(d.node.as_deref(), Some("a"));
    let w = d.request_warnings();
    assert!(
        w.iter().any(|w| w.subject == "plugin lic"
            && w.message.contains("\"zz\", which is not a candidate")
            && w.message.contains("decided without it")),
        "{w:?}"
    );
    let fail = placer(
        vec![PluginSpec::new("lic", PluginKind::Filter, OnFailure::Fail)],
        fake(|_| Err(CallError("timed out after 100 ms".into()))),
        Vec::new(),
    );
    let e = fail.place(&c, &rules, &state, &request(None)).unwrap_err();
    assert!(
        matches!(&e, Error::Plugin { plugin, .. } if plugin == "lic"),
        "{e:?}"
    );
    assert_eq!(e.to_string(), "plugin lic: timed out after 100 ms");
}

#[test]
fn a_named_host_a_filter_plugin_refuses_is_a_warning_like_a_broken_rule() {
    let c = three_nodes();
    let p = placer(
        vec![PluginSpec::new("lic", PluginKind::Filter, OnFailure::Fail)],
        fake(refuse_a),
        Vec::new(),
    );
    let req = PlacementRequest {
        host: Some("a".into()),
        ..request(None)
    };
    let d = p
        .place(&c, &Rules::compile(&c), &State::new(&c), &req)
        .unwrap();
    assert_eq!(d.node.as_deref(), Some("a"));
    assert!(
        d.request_warnings()
            .iter()
            .any(|w| w.message.contains("lic: no licence")),
        "{:?}",
        d.warnings
    );
}

fn balance_answer(moves: &[(u32, &str)]) -> Vec<u8> {
    let m: Vec<serde_json::Value> = moves
        .iter()
        .map(|(v, t)| serde_json::json!({"vmid": v, "target": t, "reason": "test"}))
        .collect();
    serde_json::to_vec(&serde_json::json!({"protocol": 1, "kind": "balance", "migrations": m}))
        .unwrap()
}

fn plan_with(c: &Cluster, moves: Vec<(u32, String)>, budget: usize) -> flxp_core::balance::Plan {
    let host = fake(move |r| {
        assert!(r.guests.is_some());
        let m: Vec<(u32, &str)> = moves.iter().map(|(v, t)| (*v, t.as_str())).collect();
        Ok(balance_answer(&m))
    });
    let p = placer(
        vec![PluginSpec::new(
            "power",
            PluginKind::Balance,
            OnFailure::Fail,
        )],
        host,
        Vec::new(),
    );
    let method = Registry::builtin()
        .with_plugins(p.plugins())
        .unwrap()
        .parse("power")
        .unwrap();
    let options = BalanceOptions {
        method,
        max_migrations: budget,
        ..BalanceOptions::default()
    };
    flxp_core::balance::plan(c, &Rules::compile(c), &State::new(c), &p, &options).unwrap()
}

#[test]
fn a_balance_plugin_s_unsafe_proposals_are_refused_with_the_reason() {
    let c = ClusterBuilder::new()
        .node(node("a").memory(16 * GIB))
        .node(node("b").memory(8 * GIB))
        .guest(vm(101, "a").mem(6 * GIB, 6 * GIB))
        .guest(vm(102, "a").mem(6 * GIB, 6 * GIB))
        .guest(vm(103, "a").locked("backup"))
        .build();
    let plan = plan_with(
        &c,
        vec![
            (101, "b".into()),
            (102, "b".into()),
            (103, "b".into()),
            (999, "b".into()),
            (101, "nowhere".into()),
        ],
        10,
    );
    assert_eq!(plan.method, "power");
    let moved: Vec<u32> = plan.migrations.iter().map(|m| m.vmid).collect();
    assert_eq!(moved, [101]);
    assert!(plan.migrations[0].reason.starts_with("plugin power: test"));
    // Refusals are the proposals' verdicts (one each), no longer
    // guests `skipped` as unmovable or warnings.
    let outcome = plan.plugin.as_ref().unwrap();
    let why = |i: usize| outcome.proposals[i].why.clone().unwrap_or_default();
    assert!(why(1).contains("memory: needs"), "{}", why(1));
    assert!(why(2).contains("locked (backup)"), "{}", why(2));
    assert!(
        why(3).contains("guest 999 is not in the zone"),
        "{}",
        why(3)
    );
    assert!(
        plan.skipped
            .iter()
            .all(|s| !s.reason.contains("plugin power"))
    );
    assert!(
        plan.summary
            .contains("1 proposed migration(s) accepted, 4 refused"),
        "{}",
        plan.summary
    );
}

fn random_cluster() -> impl Strategy<Value = (Cluster, Vec<(u32, String)>)> {
    let nodes = prop::collection::vec((4u64..=32, 0u64..=80, prop::bool::weighted(0.1)), 2..6);
    (
        nodes,
        prop::collection::vec((0usize..20, 0usize..6, 1u64..=8, 0usize..6), 0..20),
        prop::collection::vec((0u32..25, 0usize..7), 0..15),
    )
        .prop_map(|(nodes, guests, proposals)| {
            const TAGS: [&str; 6] = [
                "",
                "flxp.anti-affinity.x",
                "flxp.affinity.y",
                "flxp.node.n0",
                "flxp.ignore",
                "",
            ];
            let n = nodes.len();
            let mut b = ClusterBuilder::new();
            for (i, (mem, used, offline)) in nodes.iter().enumerate() {
                let mut s = node(&format!("n{i}"))
                    .memory(mem * GIB)
                    .used(mem * GIB * used / 100);
                if *offline {
                    s = s.offline();
                }
                b = b.node(s);
            }
            for (i, (_, at, gib, tag)) in guests.iter().enumerate() {
                b = b.guest(
                    vm(100 + i as u32, &format!("n{}", at % n))
                        .mem(gib * GIB / 2, gib * GIB)
                        .tagged(TAGS[*tag]),
                );
            }
            let proposals = named_proposals(proposals, n);
            (b.build(), proposals)
        })
}

/// Proposals (guest offset, node index) of a random cluster of `n` nodes as (vmid, node name);
/// an index past the last node names a node that does not exist.
fn named_proposals(proposals: Vec<(u32, usize)>, n: usize) -> Vec<(u32, String)> {
    proposals
        .into_iter()
        .map(|(v, t)| {
            (
                100 + v,
                if t < n {
                    format!("n{t}")
                } else {
                    "ghost".to_owned()
                },
            )
        })
        .collect()
}

/// Like [`random_cluster`], with some guests migrating (a running task) to another node: the
/// plugin may propose moving them, or filling their targets.
fn random_cluster_in_flight() -> impl Strategy<Value = (Cluster, Vec<(u32, String)>, Vec<u32>)> {
    let nodes = prop::collection::vec((4u64..=32, 0u64..=60), 2..6);
    (
        nodes,
        prop::collection::vec(
            (0usize..6, 1u64..=8, prop::option::weighted(0.3, 0usize..6)),
            1..16,
        ),
        prop::collection::vec((0u32..16, 0usize..7), 0..15),
    )
        .prop_map(|(nodes, guests, proposals)| {
            let n = nodes.len();
            let mut b = ClusterBuilder::new();
            for (i, (mem, used)) in nodes.iter().enumerate() {
                b = b.node(
                    node(&format!("n{i}"))
                        .memory(mem * GIB)
                        .used(mem * GIB * used / 100),
                );
            }
            let mut moving = Vec::new();
            for (i, (at, gib, to)) in guests.iter().enumerate() {
                let vmid = 100 + i as u32;
                let from = at % n;
                b = b.guest(vm(vmid, &format!("n{from}")).mem(gib * GIB / 2, gib * GIB));
                if let Some(to) = to.map(|t| t % n).filter(|&t| t != from) {
                    b = b.task(migrating(
                        vmid,
                        &format!("n{from}"),
                        Some(&format!("n{to}")),
                    ));
                    moving.push(vmid);
                }
            }
            let proposals = named_proposals(proposals, n);
            (b.build(), proposals, moving)
        })
}

#[test]
fn a_balance_proposal_gets_exactly_one_verdict_with_its_kind() {
    use flxp_core::balance::Refusal;
    let c = ClusterBuilder::new()
        .node(node("a").memory(16 * GIB))
        .node(node("b").memory(8 * GIB))
        .node(node("c").memory(8 * GIB).offline())
        .guest(vm(101, "a").mem(2 * GIB, 2 * GIB))
        .guest(vm(102, "a").mem(7 * GIB, 7 * GIB))
        .guest(vm(103, "a").locked("backup"))
        .guest(vm(104, "a").mem(GIB, GIB).tagged("flxp.node.a"))
        .guest(vm(105, "b").mem(GIB, GIB))
        .guest(vm(106, "a").mem(GIB, GIB))
        .build();
    let plan = plan_with(
        &c,
        vec![
            (101, "b".into()),
            (101, "a".into()),
            (102, "b".into()),
            (103, "b".into()),
            (999, "b".into()),
            (101, "nowhere".into()),
            (105, "b".into()),
            (104, "b".into()),
            (106, "c".into()),
            (106, "b".into()),
        ],
        2,
    );
    let outcome = plan.plugin.as_ref().unwrap();
    assert_eq!(outcome.plugin, "power");
    assert_eq!(outcome.error, None);
    let kinds: Vec<Option<Refusal>> = outcome.proposals.iter().map(|p| p.refused).collect();
    assert_eq!(
        kinds,
        [
            None,
            Some(Refusal::Duplicate),
            Some(Refusal::Overcommit),
            Some(Refusal::NotMovable),
            Some(Refusal::UnknownGuest),
            Some(Refusal::UnknownNode),
            Some(Refusal::AlreadyThere),
            Some(Refusal::Rule),
            Some(Refusal::Unavailable),
            None,
        ],
        "{:#?}",
        outcome.proposals
    );
    assert!(
        outcome
            .proposals
            .iter()
            .all(|p| p.accepted == p.refused.is_none())
    );
    assert!(
        outcome
            .proposals
            .iter()
            .all(|p| p.accepted || p.why.is_some())
    );
    // The budget is a refusal too.
    let plan = plan_with(&c, vec![(101, "b".into()), (106, "b".into())], 1);
    let kinds: Vec<Option<Refusal>> = plan
        .plugin
        .unwrap()
        .proposals
        .iter()
        .map(|p| p.refused)
        .collect();
    assert_eq!(kinds, [None, Some(Refusal::Budget)]);
}

#[test]
fn a_failed_balance_plugin_with_ignore_is_recorded_in_the_plan() {
    let c = three_nodes();
    let p = placer(
        vec![PluginSpec::new(
            "power",
            PluginKind::Balance,
            OnFailure::Ignore,
        )],
        fake(|_| Err(CallError("timed out after 100 ms".into()))),
        Vec::new(),
    );
    let options = BalanceOptions {
        method: Registry::builtin()
            .with_plugins(p.plugins())
            .unwrap()
            .parse("power")
            .unwrap(),
        ..BalanceOptions::default()
    };
    let plan =
        flxp_core::balance::plan(&c, &Rules::compile(&c), &State::new(&c), &p, &options).unwrap();
    let outcome = plan.plugin.unwrap();
    assert_eq!(outcome.error.as_deref(), Some("timed out after 100 ms"));
    assert!(outcome.proposals.is_empty());
    assert!(plan.migrations.is_empty());
    assert!(
        plan.summary
            .contains("plugin power failed: timed out after 100 ms"),
        "{}",
        plan.summary
    );
}

/// A score plugin that gives every node the same score has no say:
/// it neither counts in the weighted mean (diluting the other scorers) nor shows in the
/// breakdown, like a built-in scorer that has nothing to say.
#[test]
fn a_score_plugin_without_spread_has_no_say() {
    let c = three_nodes();
    for flat in [0.0, 7.0] {
        let host = fake(move |r| {
            let scores: Vec<serde_json::Value> = r
                .nodes
                .iter()
                .map(|n| serde_json::json!({"node": n.name, "score": flat}))
                .collect();
            Ok(serde_json::to_vec(
                &serde_json::json!({"protocol": 1, "kind": "score", "scores": scores}),
            )
            .unwrap())
        });
        let weights: BTreeMap<String, f64> =
            [("free-memory".to_owned(), 1.0), ("flat".to_owned(), 1.0)].into();
        let policy = Policy::custom_with("mine", weights, &["flat"]).unwrap();
        let p = placer(
            vec![PluginSpec::new("flat", PluginKind::Score, OnFailure::Fail)],
            host,
            vec![policy],
        );
        let d = p
            .place(
                &c,
                &Rules::compile(&c),
                &State::new(&c),
                &request(Some("mine")),
            )
            .unwrap();
        let a = d.candidates.iter().find(|x| x.node == "a").unwrap();
        assert_eq!(a.score, Some(a.scores["free-memory"]), "{flat}: {a:?}");
        assert!(!a.scores.contains_key("flat"), "{flat}: {a:?}");
    }
}

/// Every accepted step passes flxp's own checks on the state the earlier ones leave, and no node
/// that gained guests ends above its memory.
fn replays_safely(c: &Cluster, plan: &flxp_core::balance::Plan) -> Result<(), TestCaseError> {
    let rules = Rules::compile(c);
    let start = State::new(c);
    let after = replay(c, &rules, &start, &support::placer(), &plan.migrations);
    prop_assert!(after.is_ok(), "{:?}", after.err());
    let after = after.unwrap();
    for n in c.node_indexes() {
        let node = c.node(n);
        if after.usage(n).guests > start.usage(n).guests {
            prop_assert!(
                after.usage(n).mem <= node.maxmem,
                "{} overcommitted",
                node.name
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn no_accepted_balance_proposal_is_an_unsafe_step((c, proposals) in random_cluster(), budget in 1usize..6) {
        let plan = plan_with(&c, proposals, budget);
        replays_safely(&c, &plan)?;
        prop_assert!(plan.migrations.len() <= budget);
        let mut seen = std::collections::BTreeSet::new();
        for m in &plan.migrations {
            prop_assert!(seen.insert(m.vmid), "guest {} moves twice", m.vmid);
        }
    }

    /// The same with migrations in flight: a guest on its way is never moved again, its
    /// target counts it already, and every proposal gets exactly one verdict.
    #[test]
    fn no_balance_proposal_is_an_unsafe_step_with_migrations_in_flight((c, proposals, moving) in random_cluster_in_flight(), budget in 1usize..6) {
        let count = proposals.len();
        let plan = plan_with(&c, proposals, budget);
        replays_safely(&c, &plan)?;
        for m in &plan.migrations {
            prop_assert!(!moving.contains(&m.vmid), "guest {} is in flight and moves again", m.vmid);
        }
        let outcome = plan.plugin.as_ref().unwrap();
        prop_assert_eq!(outcome.proposals.len(), count);
        let accepted = outcome.proposals.iter().filter(|p| p.accepted).count();
        prop_assert_eq!(accepted, plan.migrations.len());
    }
}
