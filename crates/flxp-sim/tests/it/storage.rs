//! `GET /nodes/{node}/storage`: its figures are summed once per world change, and answer the
//! same as walking every guest's volumes per call did (the simulator's old way).

use serde_json::Value;

use crate::support::{GIB, TestSim, cluster};

/// (total, used, avail) of `storage` in `node`'s storage list.
async fn figures(s: &TestSim, node: &str, storage: &str) -> (u64, u64, u64) {
    let list = s.get(&format!("/nodes/{node}/storage")).await;
    let e: &Value = list
        .data()
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["storage"] == storage)
        .unwrap_or_else(|| panic!("no {storage} on {node}"));
    let n = |k: &str| e[k].as_u64().unwrap();
    (n("total"), n("used"), n("avail"))
}

/// What walking every guest per call gives (`World::storage_usage`), as (total, used, avail).
fn walked(s: &TestSim, node: &str, storage: &str) -> (u64, u64, u64) {
    let (total, used) = s.sim.world().storage_usage(storage, node);
    (total, used, total - used)
}

/// Every (node, storage) pair of the world.
fn pairs(s: &TestSim) -> Vec<(String, String)> {
    let w = s.sim.world();
    let mut out = Vec::new();
    for n in w.nodes.keys() {
        for st in w.storages.values().filter(|st| st.available_on(n)) {
            out.push((n.clone(), st.id.clone()));
        }
    }
    out
}

/// The standard cluster plus volumes the sums must treat as `bytes_on` does: an unused disk
/// and an ISO (not counted), a second disk, a linked clone of a template (0 bytes), a container
/// mount point, and a disk on a storage the world does not know.
fn varied() -> TestSim {
    let s = TestSim::new(cluster());
    {
        let mut w = s.sim.world();
        let mut set = |vmid: u32, key: &str, value: &str| {
            w.guests
                .get_mut(&vmid)
                .unwrap()
                .config
                .values
                .insert(key.into(), value.into());
        };
        set(101, "unused0", "local-lvm:vm-101-disk-9,size=50G");
        set(101, "ide2", "local-lvm:iso/debian.iso,media=cdrom,size=1G");
        set(101, "scsi1", "ceph:vm-101-disk-1,size=10G");
        set(102, "scsi1", "ceph:base-9000-disk-0/vm-102-disk-1,size=32G");
        set(103, "mp0", "local-lvm:vm-103-disk-1,mp=/srv,size=4G");
        set(120, "scsi1", "gone:vm-120-disk-1,size=2G");
    }
    s
}

#[tokio::test(start_paused = true)]
async fn the_storage_list_answers_as_walking_every_guest_did() {
    let s = varied();
    let pairs = pairs(&s);
    assert_eq!(pairs.len(), 6, "{pairs:?}");
    for (node, storage) in &pairs {
        assert_eq!(
            figures(&s, node, storage).await,
            walked(&s, node, storage),
            "{storage} on {node}"
        );
    }
    // Local: each node its own guests' volumes (101: 8G disk; 9001: a 16G full template disk).
    let (_, pve1_local, _) = figures(&s, "pve1", "local-lvm").await;
    let (_, pve2_local, _) = figures(&s, "pve2", "local-lvm").await;
    assert_eq!(pve1_local, 24 * GIB);
    assert_eq!(pve2_local, 12 * GIB, "103: 8G rootfs + 4G mount point");
    assert_eq!(figures(&s, "pve3", "local-lvm").await.1, 0);
    // Shared: the same for every node.
    let ceph = figures(&s, "pve1", "ceph").await;
    assert_eq!(figures(&s, "pve3", "ceph").await, ceph);
    // The snapshot the control endpoint writes sums them the same way.
    let snap = s.sim.world().snapshot();
    assert_eq!(snap.nodes["pve1"].storage_avail["ceph"], ceph.2);
    assert_eq!(
        snap.nodes["pve2"].storage_avail["local-lvm"],
        figures(&s, "pve2", "local-lvm").await.2
    );
}

#[tokio::test(start_paused = true)]
async fn the_storage_list_follows_the_world_when_it_changes() {
    let s = varied();
    let (_, ceph_before, _) = figures(&s, "pve2", "ceph").await;
    let (_, local_before, _) = figures(&s, "pve1", "local-lvm").await;
    // Reads keep the sums: the next storage list reuses them.
    for path in [
        "/cluster/resources",
        "/nodes/pve1/config",
        "/nodes/pve1/rrddata?timeframe=hour",
        "/cluster/ha/status/current",
        "/cluster/options",
        "/cluster/tasks",
        "/nodes/pve2/storage",
    ] {
        s.get(path).await.data();
        assert!(s.sim.world().storage_use_kept(), "after GET {path}");
    }

    // A resize lands as a due event: the next list sees the bigger disk.
    let upid = s
        .put(
            "/nodes/pve2/qemu/102/resize",
            &[("disk", "scsi0"), ("size", "+8G")],
        )
        .await
        .upid();
    assert_eq!(s.wait(&upid).await["exitstatus"], "OK");
    assert_eq!(figures(&s, "pve1", "ceph").await.1, ceph_before + 8 * GIB);
    assert_eq!(figures(&s, "pve2", "ceph").await.1, ceph_before + 8 * GIB);

    // A change made on the world directly is seen too.
    s.sim
        .world()
        .guests
        .get_mut(&101)
        .unwrap()
        .config
        .values
        .insert("scsi2".into(), "local-lvm:vm-101-disk-2,size=4G".into());
    assert!(!s.sim.world().storage_use_kept());
    assert_eq!(
        figures(&s, "pve1", "local-lvm").await.1,
        local_before + 4 * GIB
    );
    for (node, storage) in pairs(&s) {
        assert_eq!(
            figures(&s, &node, &storage).await,
            walked(&s, &node, &storage),
            "{storage} on {node}"
        );
    }
}
