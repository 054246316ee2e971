//! Tag validation (Proxmox's 400) and normalisation (lowercase, sorted, deduplicated, `;`).

use crate::support::TestSim;

#[tokio::test(start_paused = true)]
async fn a_tag_proxmox_rejects_is_rejected_the_same_way() {
    let s = TestSim::cluster();
    let r = s
        .put(
            "/nodes/pve1/qemu/100/config",
            &[("tags", "flxp/affinity=web")],
        )
        .await;
    r.assert_refused(400, "Parameter verification failed.");
    assert_eq!(
        r.json["errors"]["tags"],
        "invalid format - invalid characters in tag\n"
    );
    for bad in ["-leading", "a:b", "x@y"] {
        let r = s.put("/nodes/pve1/qemu/100/config", &[("tags", bad)]).await;
        assert_eq!(r.status, 400, "{bad}");
    }
}

#[tokio::test(start_paused = true)]
async fn tags_are_stored_lowercase_sorted_and_deduplicated() {
    let s = TestSim::cluster();
    let r = s
        .put(
            "/nodes/pve1/qemu/100/config",
            &[("tags", "Web;db, web FLXP.ignore,flxp.anti-affinity.web")],
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    let want = "db;flxp.anti-affinity.web;flxp.ignore;web";
    assert_eq!(
        s.get("/nodes/pve1/qemu/100/config").await.data()["tags"],
        want
    );
    assert_eq!(s.resource("qemu/100").await["tags"], want);
    let list = s.get("/nodes/pve1/qemu").await;
    let entry = list
        .data()
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["vmid"] == 100)
        .unwrap()
        .clone();
    assert_eq!(entry["tags"], want);
    // Deleting the key removes the tags entirely (absent, not empty).
    assert_eq!(
        s.put("/nodes/pve1/qemu/100/config", &[("delete", "tags")])
            .await
            .status,
        200
    );
    assert!(s.resource("qemu/100").await.get("tags").is_none());
}

#[tokio::test(start_paused = true)]
async fn tags_change_at_once_on_a_running_vm() {
    let s = TestSim::cluster();
    assert_eq!(
        s.put("/nodes/pve1/qemu/100/config", &[("tags", "a")])
            .await
            .status,
        200
    );
    let cfg = s.get("/nodes/pve1/qemu/100/config?current=1").await;
    assert_eq!(cfg.data()["tags"], "a", "tags are fast-plug, not pending");
}
