//! The creation steps against the simulated cluster (HTTPS, in-process, time-scaled so clones and
//! starts take milliseconds), with a spy that records calls and can hand out a taken VMID.

// Tests may panic on unexpected errors: that is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use flxp_core::Scheduler;
use flxp_core::balance::Registry;
use flxp_core::placement::{PlacementOptions, Placer};
use flxp_pve::types::*;
use flxp_pve::{Request, Result, Secret, Transport};
use flxp_sim::scenario::{ErrorFault, FaultSpec};
use flxp_sim::{Scenario, Sim, SimHandle};

use super::fixtures::{self, KEY};
use super::*;
use crate::reserve::Reservations;
use crate::sim_client;

/// A transport that records every call as its endpoint (`METHOD /path` template); `nextid`
/// answers from a queue first.
struct Spy {
    inner: Arc<dyn Transport>,
    calls: Mutex<Vec<String>>,
    next_ids: Mutex<VecDeque<u32>>,
    /// Sends resizes with a digest that matches no config.
    stale_resize_digest: AtomicBool,
    /// From the first call of this method on, nothing reaches the API any more: flxp was killed
    /// there (`kill -9`), leaving the VM as it was.
    dead_from: Mutex<Option<&'static str>>,
    /// Config updates after a start fail (the marker's removal).
    refuse_config_after_start: AtomicBool,
}

impl Spy {
    fn note(&self, name: &str) {
        self.calls.lock().unwrap().push(name.to_owned());
    }

    /// The calls other than reads of tasks and the cluster, in order.
    fn steps(&self) -> Vec<String> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| {
                !matches!(
                    c.as_str(),
                    "GET /nodes/{node}/tasks/{upid}/status" | "GET /nodes/{node}/tasks/{upid}/log"
                )
            })
            .cloned()
            .collect()
    }

    fn count(&self, name: &str) -> usize {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| *c == name)
            .count()
    }
}

#[async_trait]
impl Transport for Spy {
    async fn send(&self, request: Request) -> Result<flxp_pve::Data> {
        let name = request.endpoint;
        self.note(name);
        let dead = {
            let from = *self.dead_from.lock().unwrap();
            from.is_some_and(|f| self.count(f) > 0)
        };
        let refused = name == "PUT /nodes/{node}/{kind}/{vmid}/config"
            && self.refuse_config_after_start.load(Ordering::SeqCst)
            && self.count("POST /nodes/{node}/{kind}/{vmid}/status/start") > 0;
        if dead || refused {
            return Err(flxp_pve::Error::Connect {
                host: "pve".into(),
                message: "Connection refused".into(),
            });
        }
        if name == "GET /cluster/nextid" {
            if let Some(id) = self.next_ids.lock().unwrap().pop_front() {
                return flxp_pve::reply(id.to_string());
            }
        }
        if name == "PUT /nodes/{node}/qemu/{vmid}/resize"
            && self.stale_resize_digest.load(Ordering::SeqCst)
        {
            let params: ResizeParams = request.decode_params()?;
            let stale = ResizeParams {
                digest: Some("0".repeat(40)),
                ..params
            };
            return self.inner.send(request.params(&stale)?).await;
        }
        self.inner.send(request).await
    }

    fn server_time(&self) -> Option<i64> {
        self.inner.server_time()
    }
}

struct World {
    handle: SimHandle,
    spy: Arc<Spy>,
    /// The endpoints over the spy.
    api: Pve,
    creator: Creator,
}

impl World {
    fn sim(&self) -> &Sim {
        self.handle.sim()
    }

    async fn model(&self) -> Arc<ClusterModel> {
        let snap = crate::collect_snapshot(&self.api, 1_764_400_000)
            .await
            .unwrap();
        Arc::new(ClusterModel::from_snapshot(&snap, &flxp_core::Overrides::default()).unwrap())
    }

    async fn create(&self, req: &VmRequest) -> Result<CreatedVm, CreateError> {
        let model = self.model().await;
        self.creator.create(&model, req).await
    }

    fn guest_count(&self) -> usize {
        self.sim().world().guests.len()
    }

    fn fail(&self, method: &str, path: &str) {
        self.fail_all(&[(method, path)]);
    }

    /// Every call of these `(method, path)` pairs fails with a 500.
    fn fail_all(&self, calls: &[(&str, &str)]) {
        self.sim().world().faults.set(FaultSpec {
            errors: calls
                .iter()
                .map(|(method, path)| ErrorFault {
                    path: (*path).into(),
                    method: Some((*method).into()),
                    rate: 1.0,
                    status: 500,
                    message: "simulated failure".into(),
                })
                .collect(),
            ..FaultSpec::default()
        });
    }

    /// Creates `req` with every `method path` call failing: the guest count before, the error.
    async fn create_failing(
        &self,
        method: &str,
        path: &str,
        req: &VmRequest,
    ) -> (usize, CreateError) {
        let before = self.guest_count();
        self.fail(method, path);
        (before, self.create(req).await.unwrap_err())
    }

    /// Creates and expects a `no capacity` refusal: its reasons.
    async fn no_capacity(&self, req: &VmRequest) -> Vec<String> {
        let e = self.create(req).await.unwrap_err();
        capacity_reasons(&e).to_vec()
    }

    /// A creation refused for want of room, the first reason starting with `why`: nothing was
    /// made.
    async fn assert_no_room(&self, req: &VmRequest, before: usize, why: &str) {
        let reasons = self.no_capacity(req).await;
        assert!(reasons[0].starts_with(why), "{reasons:?}");
        self.assert_nothing_made(before);
    }

    /// Nothing was made: no guest more than `before`, no clone asked for, no room held.
    fn assert_nothing_made(&self, before: usize) {
        assert_eq!(self.guest_count(), before);
        assert_eq!(self.spy.count("POST /nodes/{node}/qemu/{vmid}/clone"), 0);
        assert!(self.creator.reservations().is_empty());
    }

    /// Once the destroy task has landed, the half-made VM is gone and holds no room.
    async fn assert_removed(&self, before: usize, vmid: u32) {
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(self.guest_count(), before);
        assert!(!self.sim().world().guests.contains_key(&vmid));
        assert!(self.creator.reservations().is_empty());
    }
}

/// The reasons of a `no capacity` error; any other error fails the test.
fn capacity_reasons(e: &CreateError) -> &[String] {
    let CreateError::NoCapacity { reasons, .. } = e else {
        panic!("{e:?}");
    };
    reasons
}

/// The parts of a failed step: which step, the VM, its cleanup and Proxmox's error.
fn step_failure(e: &CreateError) -> (CreateStep, Option<u32>, &Cleanup, &flxp_pve::Error) {
    let CreateError::Step {
        step,
        vmid,
        cleanup,
        source,
        ..
    } = e
    else {
        panic!("{e:?}");
    };
    (*step, *vmid, cleanup, source)
}

/// Whether `e` is a failure of `step` whose half-made VM ended as `cleanup`.
fn failed_at(e: &CreateError, step: CreateStep, cleanup: &Cleanup) -> bool {
    matches!(e, CreateError::Step { step: s, cleanup: c, .. } if *s == step && c == cleanup)
}

/// `e` is a failure of `step` on the simulated fault whose VM was removed, and says so: the
/// VM's id and the error's text.
fn removed_after_fault(e: &CreateError, step: CreateStep) -> (u32, String) {
    let (failed, vmid, cleanup, _) = step_failure(e);
    assert_eq!(failed, step);
    assert_eq!(*cleanup, Cleanup::Removed);
    let text = e.to_string();
    assert!(
        text.contains("simulated failure") && text.ends_with("the half-made VM was removed"),
        "{text}"
    );
    (vmid.unwrap(), text)
}

async fn world() -> World {
    world_with(Scenario::demo()).await
}

async fn world_with(mut scenario: Scenario) -> World {
    // Clones take 1 s and starts 2 s of simulated time: a few milliseconds here.
    scenario.sim.time_scale = Some(500.0);
    let (handle, client) = sim_client::serve_tls(scenario).await;
    let spy = Arc::new(Spy {
        inner: Arc::clone(client.transport()) as Arc<dyn Transport>,
        calls: Mutex::new(Vec::new()),
        next_ids: Mutex::new(VecDeque::new()),
        stale_resize_digest: AtomicBool::new(false),
        dead_from: Mutex::new(None),
        refuse_config_after_start: AtomicBool::new(false),
    });
    let scheduler = Scheduler::new(
        Placer::new(PlacementOptions::default(), Vec::new()).unwrap(),
        Registry::builtin(),
    )
    .unwrap();
    let options = CreateOptions {
        wait: TaskWait {
            interval: Duration::from_millis(10),
            timeout: Some(Duration::from_secs(20)),
            log_lines: 5,
        },
        ..CreateOptions::default()
    };
    let api = Pve::from_transport(Arc::clone(&spy));
    let creator = Creator::new(
        api.clone(),
        &scheduler,
        "lab",
        Reservations::new(Duration::from_secs(60)),
        options,
    );
    World {
        handle,
        spy,
        api,
        creator,
    }
}

fn request() -> VmRequest {
    VmRequest {
        ssh_public_key: Some(KEY.into()),
        user: Some("admin".into()),
        password: Some(Secret::new("initial-password")),
        interfaces: vec![fixtures::nic(false)],
        tags: vec!["flxp.anti-affinity.web".into()],
        ..fixtures::request()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vm_is_cloned_shaped_and_started_where_its_rules_allow() {
    let w = world().await;
    let vm = w.create(&request()).await.unwrap();
    // web-1..3 (flxp.anti-affinity.web) hold pve1..pve3: only pve4 is left.
    assert_eq!(vm.node, "pve4");
    assert_eq!(vm.name, "web-server");
    assert_eq!(vm.placement.node.as_deref(), Some("pve4"));
    {
        let world = w.sim().world();
        let g = &world.guests[&vm.vmid];
        assert_eq!(g.node, "pve4");
        assert!(g.running, "the VM runs");
        let v = &g.config.values;
        assert_eq!(v["cores"], "2");
        assert_eq!(v["sockets"], "1");
        assert_eq!(v["memory"], "4096");
        assert_eq!(v["name"], "web-server");
        assert_eq!(v["ciuser"], "admin");
        assert_eq!(v["cipassword"], "initial-password");
        assert_eq!(
            flxp_pve::types::form::decode_sshkeys(&v["sshkeys"]).as_deref(),
            Some(KEY)
        );
        assert!(
            v["net0"].ends_with(",bridge=vmbr0,tag=100") && v["net0"].starts_with("virtio="),
            "{}",
            v["net0"]
        );
        assert!(v["scsi0"].contains("backup=0"), "{}", v["scsi0"]);
        assert!(v["scsi0"].starts_with("ceph:"), "{}", v["scsi0"]);
        assert_eq!(v["tags"], "flxp.anti-affinity.web");
        assert!(!v.contains_key("lock"));
    }
    // The reservation lasts until a snapshot shows the VM running.
    assert_eq!(w.creator.reservations().len(), 1);
    let model = w.model().await;
    let mut state = model.state.clone();
    assert_eq!(
        w.creator
            .reservations()
            .apply(&model.cluster, model.taken, &mut state),
        0
    );
    assert!(w.creator.reservations().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_host_without_room_creates_nothing() {
    let w = world().await;
    let before = w.guest_count();
    let mut req = request();
    req.host = Some("pve4".into());
    req.memory = 200 << 30;
    w.assert_no_room(&req, before, "pve4: memory: needs 200.0 GiB")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_start_removes_the_half_made_vm() {
    let w = world().await;
    let (before, e) = w
        .create_failing("POST", "/nodes/*/qemu/*/status/start", &request())
        .await;
    let (vmid, text) = removed_after_fault(&e, CreateStep::Start);
    assert!(
        text.starts_with(&format!("starting the VM failed for VM {vmid} on pve4: ")),
        "{text}"
    );
    // Let the destroy task land, then nothing is left.
    w.assert_removed(before, vmid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_configuration_removes_the_clone() {
    let w = world().await;
    let (before, e) = w
        .create_failing("PUT", "/nodes/*/qemu/*/config", &request())
        .await;
    assert!(
        failed_at(&e, CreateStep::Configure, &Cleanup::Removed),
        "{e:?}"
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(w.guest_count(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_clone_leaves_nothing_and_says_so() {
    let w = world().await;
    let (before, e) = w
        .create_failing("POST", "/nodes/*/qemu/9000/clone", &request())
        .await;
    assert!(
        failed_at(&e, CreateStep::Clone, &Cleanup::NotNeeded),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .starts_with("cloning the template failed for VM "),
        "{e}"
    );
    assert_eq!(w.guest_count(), before);
    assert!(w.creator.reservations().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vmid_someone_else_took_is_replaced_by_a_fresh_one() {
    let w = world().await;
    // 101 exists: the clone answers "already exists" and the next id from Proxmox is used.
    w.spy.next_ids.lock().unwrap().push_back(101);
    let vm = w.create(&request()).await.unwrap();
    assert_ne!(vm.vmid, 101);
    assert_eq!(w.spy.count("GET /cluster/nextid"), 2);
    assert_eq!(w.spy.count("POST /nodes/{node}/qemu/{vmid}/clone"), 2);
    assert!(w.sim().world().guests[&vm.vmid].running);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn templates_that_are_missing_or_no_templates_are_unknown_images() {
    let w = world().await;
    let mut req = request();
    req.image.template = Some(4242);
    let e = w.create(&req).await.unwrap_err();
    assert!(
        matches!(&e, CreateError::UnknownImage { message, .. } if message == "template VM 4242 does not exist"),
        "{e:?}"
    );
    req.image.template = Some(101);
    let e = w.create(&req).await.unwrap_err();
    assert!(
        e.to_string().contains("VM 101 (web-1) is not a template"),
        "{e}"
    );
    assert_eq!(w.spy.count("POST /nodes/{node}/qemu/{vmid}/clone"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_larger_storage_profile_grows_the_boot_disk_before_the_start() {
    let w = world().await;
    let mut req = request();
    // Template 9000 has a 32 GiB boot disk (scsi0).
    req.disk_bytes = 64 << 30;
    let vm = w.create(&req).await.unwrap();
    {
        let world = w.sim().world();
        let g = &world.guests[&vm.vmid];
        assert!(g.running);
        let scsi0 = &g.config.values["scsi0"];
        assert!(
            scsi0.starts_with("ceph:base-9000-disk-0/vm-") && scsi0.contains(",size=64G"),
            "{scsi0}"
        );
        assert!(
            scsi0.contains("backup=0"),
            "the shape is written after the resize: {scsi0}"
        );
        // The resize task ended before the start task began.
        let tasks = world.tasks.all();
        let id = vm.vmid.to_string();
        let resize = tasks
            .iter()
            .find(|t| t.kind == "resize" && t.id == id)
            .unwrap();
        let start = tasks
            .iter()
            .find(|t| t.kind == "qmstart" && t.id == id)
            .unwrap();
        assert_eq!(resize.exitstatus.as_deref(), Some("OK"));
        assert!(resize.ended.unwrap().floor() as i64 <= start.starttime);
    }
    let vms = w
        .api
        .cluster_resources(Some(ResourceType::Vm))
        .await
        .unwrap();
    let r = vms.iter().find(|r| r.vmid == Some(vm.vmid)).unwrap();
    assert_eq!(r.maxdisk, Some(64 << 30));
    let steps = w.spy.steps();
    let at = |name: &str| steps.iter().position(|c| c == name).unwrap();
    assert!(
        at("POST /nodes/{node}/qemu/{vmid}/clone") < at("PUT /nodes/{node}/qemu/{vmid}/resize"),
        "{steps:?}"
    );
    // The config writes: the flxp.creating marker after the clone, the shape after the resize
    // and before the start, the marker's removal after the start (it stays on the VM
    // until the VM is complete).
    let updates: Vec<usize> = (0..steps.len())
        .filter(|&i| steps[i] == "PUT /nodes/{node}/{kind}/{vmid}/config")
        .collect();
    assert_eq!(updates.len(), 3, "{steps:?}");
    assert!(
        at("POST /nodes/{node}/qemu/{vmid}/clone") < updates[0],
        "{steps:?}"
    );
    assert!(
        at("PUT /nodes/{node}/qemu/{vmid}/resize") < updates[1],
        "{steps:?}"
    );
    assert!(
        updates[1] < at("POST /nodes/{node}/{kind}/{vmid}/status/start"),
        "{steps:?}"
    );
    assert!(
        at("POST /nodes/{node}/{kind}/{vmid}/status/start") < updates[2],
        "{steps:?}"
    );
    assert_eq!(w.spy.count("PUT /nodes/{node}/qemu/{vmid}/resize"), 1);
    // The resize task is followed before anything else happens to the VM.
    let calls = w.spy.calls.lock().unwrap().clone();
    let resized = calls
        .iter()
        .position(|c| c == "PUT /nodes/{node}/qemu/{vmid}/resize")
        .unwrap();
    assert_eq!(
        calls[resized + 1],
        "GET /nodes/{node}/tasks/{upid}/status",
        "{calls:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_of_the_template_size_resizes_nothing() {
    let w = world().await;
    let vm = w.create(&request()).await.unwrap();
    assert_eq!(w.spy.count("PUT /nodes/{node}/qemu/{vmid}/resize"), 0);
    assert!(w.sim().world().guests[&vm.vmid].config.values["scsi0"].contains("size=32G"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_smaller_storage_profile_is_refused_before_cloning() {
    let w = world().await;
    let before = w.guest_count();
    let mut req = request();
    req.disk_bytes = 16 << 30;
    let e = w.create(&req).await.unwrap_err();
    assert!(
        matches!(&e, CreateError::Invalid { field, .. } if field == "storageProfile"),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "storageProfile: the template's boot disk is 32.0 GiB but the storage profile asks for 16.0 GiB: disks cannot shrink; use a larger storage profile"
    );
    assert_eq!(w.spy.count("GET /cluster/nextid"), 0);
    w.assert_nothing_made(before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_resize_removes_the_clone_and_starts_nothing() {
    let w = world().await;
    let mut req = request();
    req.disk_bytes = 64 << 30;
    let (before, e) = w
        .create_failing("PUT", "/nodes/*/qemu/*/resize", &req)
        .await;
    let (vmid, text) = removed_after_fault(&e, CreateStep::Resize);
    assert!(
        text.starts_with(&format!(
            "growing the boot disk failed for VM {vmid} on pve4: PUT /nodes/pve4/qemu/{vmid}/resize"
        )),
        "{text}"
    );
    assert_eq!(
        w.spy.count("POST /nodes/{node}/{kind}/{vmid}/status/start"),
        0
    );
    // Only the flxp.creating marker was written: the VM was never configured.
    assert_eq!(w.spy.count("PUT /nodes/{node}/{kind}/{vmid}/config"), 1);
    w.assert_removed(before, vmid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resize_task_that_fails_removes_the_clone() {
    let w = world().await;
    let before = w.guest_count();
    // As if someone changed the clone after it was read: the resize carries a stale digest,
    // PVE 9 accepts the call and its `resize` task fails.
    w.spy.stale_resize_digest.store(true, Ordering::SeqCst);
    let mut req = request();
    req.disk_bytes = 64 << 30;
    let e = w.create(&req).await.unwrap_err();
    let (step, vmid, cleanup, source) = step_failure(&e);
    assert_eq!(step, CreateStep::Resize);
    assert_eq!(*cleanup, Cleanup::Removed);
    let flxp_pve::Error::TaskFailed { exitstatus, .. } = source else {
        panic!("{source:?}");
    };
    assert_eq!(exitstatus, "checksum mismatch (file change by other user?)");
    assert_eq!(
        w.spy.count("POST /nodes/{node}/{kind}/{vmid}/status/start"),
        0
    );
    w.assert_removed(before, vmid.unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn before_pve_8_the_resize_answers_without_a_task() {
    let mut scenario = Scenario::demo();
    scenario.sim.version = Some("7.4.17".into());
    let w = world_with(scenario).await;
    let mut req = request();
    req.disk_bytes = 48 << 30;
    let vm = w.create(&req).await.unwrap();
    let world = w.sim().world();
    assert!(world.guests[&vm.vmid].config.values["scsi0"].contains("size=48G"));
    assert!(!world.tasks.all().iter().any(|t| t.kind == "resize"));
    assert_eq!(world.guests[&vm.vmid].maxdisk(), 48 << 30);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_storage_is_refused() {
    let w = world().await;
    let mut req = request();
    req.storage = "nvme".into();
    let e = w.create(&req).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "storageProfile: storage \"nvme\" does not exist in this zone"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storage_without_room_for_the_disk_clones_nothing() {
    let w = world().await;
    let before = w.guest_count();
    let mut req = request();
    // The demo's ceph holds 20 TiB, 3 TiB of them used before any guest volume.
    req.disk_bytes = 18 << 40;
    let reasons = w.no_capacity(&req).await;
    assert!(
        reasons
            .iter()
            .any(|r| r.starts_with("pve4: storage \"ceph\" has ")
                && r.ends_with("free, the disk needs 18.0 TiB")),
        "{reasons:?}"
    );
    // A named host short of disk room is a capacity problem too, not bad input.
    req.host = Some("pve4".into());
    w.assert_no_room(&req, before, "pve4: storage \"ceph\" has ")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_without_a_cloud_init_drive_gets_one_for_the_login() {
    let mut scenario = Scenario::demo();
    let spec = scenario.sim.guests.get_mut("9000").unwrap();
    assert!(
        spec.config.remove("ide2").is_some(),
        "the demo template has one"
    );
    let w = world_with(scenario).await;
    let vm = w.create(&request()).await.unwrap();
    let world = w.sim().world();
    let v = &world.guests[&vm.vmid].config.values;
    assert!(v["ide2"].starts_with("ceph:"), "{v:?}");
    assert!(v["ide2"].contains("cloudinit"), "{v:?}");
    assert_eq!(v["ciuser"], "admin");
    assert!(world.guests[&vm.vmid].running);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creations_in_flight_hold_their_disk_space_too() {
    let w = world().await;
    // Both decide on one snapshot: ceph has room for one 10 TiB disk, not two.
    let model = w.model().await;
    let mut req = request();
    req.disk_bytes = 10 << 40;
    req.tags = Vec::new();
    let mut other = req.clone();
    other.name = "web-other".into();
    let (a, b) = tokio::join!(
        w.creator.create(&model, &req),
        w.creator.create(&model, &other)
    );
    let (ok, err): (Vec<_>, Vec<_>) = [a, b].into_iter().partition(Result::is_ok);
    assert_eq!(ok.len(), 1, "{err:?}");
    let e = err.into_iter().next().unwrap().unwrap_err();
    let reasons = capacity_reasons(&e);
    // pve3 is tainted; every other node is refused for the disk the first creation holds.
    assert!(
        reasons
            .iter()
            .filter(|r| !r.starts_with("pve3: taints"))
            .all(|r| r.contains("storage \"ceph\" has ")),
        "{reasons:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vm_whose_creation_could_not_finish_nor_be_removed_carries_the_marker() {
    let w = world().await;
    w.fail_all(&[
        ("PUT", "/nodes/*/qemu/*/resize"),
        ("DELETE", "/nodes/*/qemu/*"),
    ]);
    let mut req = request();
    req.disk_bytes = 48 << 30;
    let e = w.create(&req).await.unwrap_err();
    let CreateError::Step {
        vmid: Some(vmid),
        cleanup: Cleanup::Failed(_),
        ..
    } = &e
    else {
        panic!("{e:?}");
    };
    // Left behind, it says what it is to every snapshot (and so to flxp status).
    let world = w.sim().world();
    let tags = world.guests[vmid].config.values["tags"].clone();
    assert!(tags.split(';').any(|t| t == CREATING_TAG), "{tags}");
}

/// The marker tags of a VM in the simulated world.
fn marker_tags(w: &World, vmid: u32) -> Vec<String> {
    let world = w.sim().world();
    world.guests[&vmid]
        .config
        .values
        .get("tags")
        .map(|t| {
            t.split(';')
                .filter(|t| t.starts_with(CREATING_TAG))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The VM the creation cloned (the only guest that was not there before).
fn new_vmid(w: &World, before: &[u32]) -> u32 {
    let world = w.sim().world();
    let fresh: Vec<u32> = world
        .guests
        .keys()
        .copied()
        .filter(|v| !before.contains(v))
        .collect();
    assert_eq!(fresh.len(), 1, "{fresh:?}");
    fresh[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_creation_killed_before_or_during_the_start_leaves_a_marked_vm() {
    // Killed as the start is asked for: resized and configured, not started, not cleaned up.
    for dies_at in [
        "PUT /nodes/{node}/qemu/{vmid}/resize",
        "POST /nodes/{node}/{kind}/{vmid}/status/start",
    ] {
        let w = world().await;
        let before: Vec<u32> = w.sim().world().guests.keys().copied().collect();
        *w.spy.dead_from.lock().unwrap() = Some(dies_at);
        let mut req = request();
        req.disk_bytes = 48 << 30;
        let e = w.create(&req).await.unwrap_err();
        assert!(
            matches!(
                &e,
                CreateError::Step {
                    cleanup: Cleanup::Failed(_),
                    ..
                }
            ),
            "{e:?}"
        );
        let vmid = new_vmid(&w, &before);
        let marker = marker_tags(&w, vmid);
        assert!(
            marker.iter().any(|t| t == CREATING_TAG),
            "killed at {dies_at}: {marker:?}"
        );
        assert!(
            marker.iter().any(|t| t
                .strip_prefix(CREATING_SINCE_PREFIX)
                .is_some_and(|n| n.parse::<i64>().is_ok())),
            "killed at {dies_at}: {marker:?}"
        );
        if dies_at == "POST /nodes/{node}/{kind}/{vmid}/status/start" {
            // Configured: the requested tags are there beside the marker.
            let world = w.sim().world();
            let tags = &world.guests[&vmid].config.values["tags"];
            assert!(tags.contains("flxp.anti-affinity.web"), "{tags}");
            assert_eq!(world.guests[&vmid].config.values["cores"], "2");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_marker_comes_off_last_after_the_start() {
    let w = world().await;
    let vm = w.create(&request()).await.unwrap();
    assert!(vm.warnings.is_empty(), "{:?}", vm.warnings);
    assert!(marker_tags(&w, vm.vmid).is_empty());
    let steps = w.spy.steps();
    let last_update = steps
        .iter()
        .rposition(|c| c == "PUT /nodes/{node}/{kind}/{vmid}/config")
        .unwrap();
    let started = steps
        .iter()
        .position(|c| c == "POST /nodes/{node}/{kind}/{vmid}/status/start")
        .unwrap();
    assert!(started < last_update, "{steps:?}");
    // A template without tags and a request without: the VM ends with none at all.
    let mut req = request();
    req.name = "bare".into();
    req.tags = Vec::new();
    let vm = w.create(&req).await.unwrap();
    assert!(
        !w.sim().world().guests[&vm.vmid]
            .config
            .values
            .contains_key("tags")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_marker_that_cannot_come_off_is_a_warning_not_a_failure() {
    let w = world().await;
    w.spy
        .refuse_config_after_start
        .store(true, Ordering::SeqCst);
    let vm = w.create(&request()).await.unwrap();
    assert_eq!(vm.warnings.len(), 1, "{:?}", vm.warnings);
    assert!(
        vm.warnings[0].contains("still carries the tag flxp.creating"),
        "{:?}",
        vm.warnings
    );
    let world = w.sim().world();
    assert!(world.guests[&vm.vmid].running, "the complete VM is kept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_cannot_carry_the_marker() {
    let w = world().await;
    for tag in ["flxp.creating", "FLXP.Creating", "flxp.creating-since.1"] {
        let mut req = request();
        req.tags = vec!["web".into(), tag.into()];
        let e = w.create(&req).await.unwrap_err();
        assert!(
            matches!(&e, CreateError::Invalid { field, .. } if field == "tags"),
            "{e:?}"
        );
        assert!(e.to_string().contains(tag), "{e}");
    }
    assert_eq!(w.spy.count("POST /nodes/{node}/qemu/{vmid}/clone"), 0);
}
