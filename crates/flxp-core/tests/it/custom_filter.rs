//! A filter defined here, outside the core, with its own prepared state and refusal reason:
//! registered on a pipeline with one line, it takes part in every placement and plan.

use std::sync::atomic::{AtomicUsize, Ordering};

use flxp_core::balance::EvacuateOptions;
use flxp_core::builder::*;
use flxp_core::evacuate::evacuate;
use flxp_core::placement::registry::StatefulFilter;
use flxp_core::placement::{
    Ctx, Filter, FilterKind, NodeView, PlacementOptions, PlacementRequest, Placer, Reason,
};
use flxp_core::{Cluster, Rules, State};

/// Nodes whose name ends in 3 take nothing.
static ENDS_IN_3: StatefulFilter<Refused> = StatefulFilter::new(
    "ends-in-3",
    FilterKind::Rule,
    "the node's name does not end in 3",
    refused,
    check,
);

/// The filter's own state: by node index, whether the node is refused, worked out once per
/// decision.
struct Refused(Vec<bool>);

fn refused(ctx: &Ctx) -> Option<Refused> {
    let nodes = ctx.cluster.nodes().iter();
    Some(Refused(nodes.map(|n| n.name.ends_with('3')).collect()))
}

fn check(_ctx: &Ctx, refused: &Refused, node: &NodeView) -> Result<(), Reason> {
    if refused.0.get(node.idx.get()).copied().unwrap_or(false) {
        Err(
            Reason::custom("ends-in-3", "name-ends-in-3", "the node's name ends in 3")
                .with_figure("digit", 3.0),
        )
    } else {
        Ok(())
    }
}

/// pve3 is the emptiest node, so the default policy picks it.
fn cluster() -> Cluster {
    ClusterBuilder::new()
        .node(node("pve1").memory(64 * GIB).used(40 * GIB))
        .node(node("pve2").memory(64 * GIB).used(30 * GIB))
        .node(node("pve3").memory(64 * GIB).used(4 * GIB))
        .guest(vm(101, "pve1").mem(8 * GIB, 8 * GIB))
        .guest(vm(102, "pve1").mem(8 * GIB, 8 * GIB))
        .build()
}

fn request(host: Option<&str>) -> PlacementRequest {
    PlacementRequest {
        memory: 4 * GIB,
        cores: 1.0,
        host: host.map(str::to_owned),
        ..PlacementRequest::default()
    }
}

fn placer() -> Placer {
    Placer::new(PlacementOptions::default(), Vec::new()).unwrap()
}

#[test]
fn a_filter_registered_with_one_line_changes_the_decision_and_says_why() {
    let c = cluster();
    let (rules, state) = (Rules::compile(&c), State::new(&c));
    let without = placer().place(&c, &rules, &state, &request(None)).unwrap();
    assert_eq!(without.node.as_deref(), Some("pve3"));

    let placer = placer().with_filter(&ENDS_IN_3).unwrap();
    let with = placer.place(&c, &rules, &state, &request(None)).unwrap();
    assert_eq!(with.node.as_deref(), Some("pve2"));
    let pve3 = with.candidates.iter().find(|c| c.node == "pve3").unwrap();
    assert!(!pve3.feasible);
    assert_eq!(pve3.reasons, ["ends-in-3: the node's name ends in 3"]);

    // The fast path and the structured reason agree.
    let subject = flxp_core::placement::Subject::new_vm(&c, &rules, &request(None))
        .unwrap()
        .0;
    let ctx = Ctx::new(&c, &rules, &state, placer.options(), &subject);
    assert_eq!(placer.best(&ctx, None).unwrap(), c.node_idx("pve2"));
    let refusals = placer.failures(&ctx, c.node_idx("pve3").unwrap());
    assert_eq!(
        refusals,
        [(
            "ends-in-3",
            FilterKind::Rule,
            Reason::custom("ends-in-3", "name-ends-in-3", "the node's name ends in 3")
                .with_figure("digit", 3.0)
        )]
    );
    assert_eq!(
        serde_json::to_value(&refusals[0].2).unwrap(),
        serde_json::json!({
            "kind": "custom",
            "filter": "ends-in-3",
            "code": "name-ends-in-3",
            "message": "the node's name ends in 3",
            "figures": {"digit": 3.0},
        })
    );
    assert_eq!(
        placer.filters().last().map(|f| f.name()),
        Some("ends-in-3"),
        "it runs after the built-in filters"
    );
}

#[test]
fn a_named_host_it_refuses_breaks_a_rule_and_the_vm_still_goes_there() {
    let c = cluster();
    let (rules, state) = (Rules::compile(&c), State::new(&c));
    let placer = placer().with_filter(&ENDS_IN_3).unwrap();
    let p = placer
        .place(&c, &rules, &state, &request(Some("pve3")))
        .unwrap();
    assert_eq!(p.node.as_deref(), Some("pve3"));
    assert_eq!(
        p.request_warnings()
            .iter()
            .map(|w| w.to_string())
            .collect::<Vec<_>>(),
        [
            "host pve3: breaks a rule (ends-in-3: the node's name ends in 3); placed there because it was named"
        ]
    );
}

#[test]
fn plans_made_with_the_pipeline_respect_it_too() {
    let c = cluster();
    let (rules, state) = (Rules::compile(&c), State::new(&c));
    let pve1 = [c.node_idx("pve1").unwrap()];
    let o = EvacuateOptions::default();
    let to = |p: &flxp_core::balance::Plan| -> Vec<(u32, String)> {
        p.migrations
            .iter()
            .map(|m| (m.vmid, m.to.clone()))
            .collect()
    };
    let plain = evacuate(&c, &rules, &state, &placer(), &pve1, &o).unwrap();
    assert!(
        to(&plain).iter().any(|(_, n)| n == "pve3"),
        "{:?}",
        to(&plain)
    );
    let placer = placer().with_filter(&ENDS_IN_3).unwrap();
    // Also through a pipeline rebuilt with other options (consolidation's ceiling does this).
    let placer = placer.with_options(PlacementOptions::default()).unwrap();
    let plan = evacuate(&c, &rules, &state, &placer, &pve1, &o).unwrap();
    assert_eq!(
        to(&plan),
        [(101, "pve2".to_owned()), (102, "pve2".to_owned())]
    );
}

/// The same filter under a built-in's name.
static NAMED_MEMORY: StatefulFilter<Refused> = StatefulFilter::new(
    "memory",
    FilterKind::Resource,
    "clashes with the built-in filter",
    refused,
    check,
);

#[test]
fn a_name_already_registered_is_refused() {
    let e = placer().with_filter(&NAMED_MEMORY).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid option filters.memory: a filter of this name is registered already"
    );
    let twice = placer()
        .with_filter(&ENDS_IN_3)
        .unwrap()
        .with_filter(&ENDS_IN_3);
    assert!(twice.is_err());
}

/// Counts its preparations; refuses nothing.
static COUNTED: StatefulFilter<()> = StatefulFilter::new(
    "counted",
    FilterKind::Rule,
    "counts how often it is prepared",
    |_| {
        COUNTED_PREPARED.fetch_add(1, Ordering::Relaxed);
        Some(())
    },
    |_, _, _| Ok(()),
);

static COUNTED_PREPARED: AtomicUsize = AtomicUsize::new(0);

#[test]
fn its_state_is_prepared_once_per_decision_not_once_per_node() {
    let c = cluster();
    let (rules, state) = (Rules::compile(&c), State::new(&c));
    let placer = placer().with_filter(&COUNTED).unwrap();
    let before = COUNTED_PREPARED.load(Ordering::Relaxed);
    let p = placer.place(&c, &rules, &state, &request(None)).unwrap();
    assert_eq!(p.node.as_deref(), Some("pve3"));
    assert_eq!(COUNTED_PREPARED.load(Ordering::Relaxed) - before, 1);
    // A filter called on its own prepares for that call.
    let subject = flxp_core::placement::Subject::new_vm(&c, &rules, &request(None))
        .unwrap()
        .0;
    let ctx = Ctx::new(&c, &rules, &state, placer.options(), &subject);
    let before = COUNTED_PREPARED.load(Ordering::Relaxed);
    assert_eq!(
        COUNTED.check(&ctx, &ctx.view(c.node_idx("pve1").unwrap())),
        Ok(())
    );
    assert_eq!(COUNTED_PREPARED.load(Ordering::Relaxed) - before, 1);
}
