//! Local disks in a live zone: the plan knows which disks a move copies and where they fit, so
//! the executor never meets a target storage without room.

use serde_json::{Value, json};

use super::cli_balance::sim_zone;

const GIB: u64 = 1 << 30;

fn node(name: &str) -> Value {
    json!({"id": format!("node/{name}"), "type": "node", "node": name, "status": "online",
           "maxcpu": 16, "cpu": 0.05, "maxmem": 64 * GIB})
}

fn storage(node: &str, id: &str, shared: bool, total: u64, used: u64) -> Value {
    json!({"id": format!("storage/{node}/{id}"), "type": "storage", "node": node, "storage": id,
           "plugintype": if shared { "rbd" } else { "lvmthin" }, "shared": u8::from(shared),
           "content": "images,rootdir", "status": "available", "maxdisk": total, "disk": used})
}

fn vm(vmid: u32, node: &str, mem: u64) -> Value {
    json!({"id": format!("qemu/{vmid}"), "type": "qemu", "vmid": vmid, "node": node,
           "name": format!("vm{vmid}"), "status": "running", "maxcpu": 2, "cpu": 0.1,
           "maxmem": mem + 2 * GIB, "mem": mem})
}

/// pve1 carries two 30 GiB VMs with 40 GiB each on local-lvm; pve2 and pve3 are empty, and by
/// name pve2 is the first choice, but its local-lvm has 12 GiB free.
fn scenario() -> String {
    let mut resources = vec![node("pve1"), node("pve2"), node("pve3")];
    for n in ["pve1", "pve2", "pve3"] {
        resources.push(storage(n, "ceph", true, 10_000 * GIB, 1_000 * GIB));
    }
    resources.push(storage("pve1", "local-lvm", false, 200 * GIB, 0));
    resources.push(storage("pve2", "local-lvm", false, 100 * GIB, 88 * GIB));
    resources.push(storage("pve3", "local-lvm", false, 200 * GIB, 0));
    resources.push(vm(104, "pve1", 30 * GIB));
    resources.push(vm(105, "pve1", 30 * GIB));
    let local = |vmid: u32| json!({"config": {"scsi0": format!("local-lvm:vm-{vmid}-disk-0,iothread=1,size=40G")}});
    json!({"resources": resources, "sim": {"guests": {"104": local(104), "105": local(105)}}})
        .to_string()
}

#[test]
fn the_plan_avoids_a_target_whose_local_storage_lacks_room_and_every_move_lands() {
    let z = sim_zone(&scenario(), 100_000.0, "", |_| {});
    let (code, out, err) = z.run(&["balance", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    // A plan that stops above the threshold exits 3 (it used to exit 0).
    let above = v["imbalance_after"].as_f64() > v["threshold"].as_f64();
    assert_eq!(code, if above { 3 } else { 0 }, "{err}\n{out}");
    let planned = v["migrations"].as_array().unwrap();
    assert!(!planned.is_empty(), "{out}");
    for m in planned {
        assert_ne!(m["to"], "pve2", "pve2's local-lvm cannot take 40 GiB: {m}");
        // Memory (30 GiB) and the local disk (40 GiB) are copied.
        assert_eq!(m["bytes"].as_u64(), Some(70 * GIB), "{m}");
        let reason = m["reason"].as_str().unwrap();
        assert!(
            reason.contains("copies its local disks (40.0 GiB on local-lvm)"),
            "{reason}"
        );
    }
    let failed = v["execution"]["failed"].as_array().unwrap();
    assert!(failed.is_empty(), "{out}");
    let done = v["execution"]["done"].as_array().unwrap();
    assert_eq!(done.len(), planned.len(), "{out}");
    for m in planned {
        let vmid = u32::try_from(m["vmid"].as_u64().unwrap()).unwrap();
        assert_eq!(z.node_of(vmid), m["to"].as_str().unwrap());
    }
}
