//! The runner's steps as errors name them, before anything reaches Proxmox: each refusal says
//! which step found it, and none leaves a reservation or an API call behind.

// Tests may panic on unexpected errors: that is the failure report.
#![allow(clippy::unwrap_used)]

use flxp_core::balance::Registry;
use flxp_core::placement::PlacementOptions;
use flxp_core::units::GIB;
use flxp_core::{Overrides, Snapshot};
use flxp_sim::SimHandle;

use super::fixtures::request;
use super::*;
use crate::sim_client::{calls, serve_snapshot};

/// Two 64 GiB nodes sharing a `ceph` storage with 1 TiB free; template 9000 on pve1, VM 101 on
/// pve2 is no template.
fn snapshot() -> Snapshot {
    let node = |n: &str| {
        format!(
            r#"{{"id":"node/{n}","type":"node","node":"{n}","status":"online","maxmem":{},"mem":{},"maxcpu":16,"cpu":0.1}}"#,
            64 * GIB,
            8 * GIB
        )
    };
    let storage = |n: &str| {
        format!(
            r#"{{"id":"storage/{n}/ceph","type":"storage","node":"{n}","storage":"ceph","shared":1,"maxdisk":{},"disk":0,"status":"available"}}"#,
            1024 * GIB
        )
    };
    let items = [
        node("pve1"),
        node("pve2"),
        storage("pve1"),
        storage("pve2"),
        format!(
            r#"{{"id":"qemu/9000","type":"qemu","vmid":9000,"name":"ubuntu","node":"pve1","status":"stopped","template":1,"maxmem":{},"maxcpu":2}}"#,
            2 * GIB
        ),
        format!(
            r#"{{"id":"qemu/101","type":"qemu","vmid":101,"name":"web-1","node":"pve2","status":"running","maxmem":{},"mem":{},"maxcpu":2,"cpu":0.1}}"#,
            4 * GIB,
            2 * GIB
        ),
    ];
    Snapshot::from_json(&format!("[{}]", items.join(","))).unwrap()
}

/// A creator on the simulated cluster of [`snapshot`], its model and the simulator, to count
/// its calls.
async fn creator() -> (Creator, Arc<ClusterModel>, SimHandle) {
    let snap = snapshot();
    let (sim, client) = serve_snapshot(&snap).await;
    let scheduler = Scheduler::new(
        Placer::new(PlacementOptions::default(), Vec::new()).unwrap(),
        Registry::builtin(),
    )
    .unwrap();
    let creator = Creator::new(
        client.into(),
        &scheduler,
        "lab",
        Reservations::new(std::time::Duration::from_secs(60)),
        CreateOptions::default(),
    );
    let model = ClusterModel::from_snapshot(&snap, &Overrides::default()).unwrap();
    (creator, Arc::new(model), sim)
}

#[tokio::test(flavor = "current_thread")]
async fn refusals_name_the_step_that_found_them_and_call_nothing() {
    let (creator, model, sim) = creator().await;
    let cases: Vec<(VmRequest, CreateStep, &str)> = vec![
        (
            VmRequest {
                name: "not a name".into(),
                ..request()
            },
            CreateStep::Validate,
            "name: ",
        ),
        (
            VmRequest {
                storage: "nvme".into(),
                ..request()
            },
            CreateStep::Validate,
            "storageProfile: storage \"nvme\" does not exist in this zone",
        ),
        (
            VmRequest {
                image: ImageSource {
                    id: "web".into(),
                    template: Some(101),
                    per_node: Default::default(),
                },
                ..request()
            },
            CreateStep::Validate,
            "image \"web\": VM 101 (web-1) is not a template",
        ),
        (
            VmRequest {
                memory: 200 * GIB,
                ..request()
            },
            CreateStep::Choose,
            "no node can take the VM: ",
        ),
    ];
    for (req, step, text) in cases {
        let e = creator.create(&model, &req).await.unwrap_err();
        assert_eq!(e.step(), step, "{e}");
        assert!(e.to_string().starts_with(text), "{e}");
        assert!(creator.reservations().is_empty());
    }
    // Only the template read of the last case reached the API; nothing was cloned.
    assert!(
        calls(&sim).iter().all(|c| c.contains("/config")),
        "{:?}",
        calls(&sim)
    );
}

#[test]
fn internal_faults_name_their_step_and_are_not_bad_input() {
    let e = CreateError::Internal {
        step: CreateStep::Reserve,
        message: "the decision booked no room".into(),
    };
    assert_eq!(e.step(), CreateStep::Reserve);
    assert_eq!(
        e.to_string(),
        "reserving room on the node failed: internal error: the decision booked no room"
    );
}
