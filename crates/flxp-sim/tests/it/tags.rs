//! Tag validation (Proxmox's 400) and normalisation (lowercase, sorted, deduplicated, `;`).

use crate::support::TestSim;

#[tokio::test(start_paused = true)]
async fn a_tag_proxmox_rejects_is_rejected_the_same_way() {
    let s = TestSim::cluster();
    let bad_chars = [("tags", "flxp/affinity=web")];
    let r = s.set_config("pve1", "qemu/100", &bad_chars).await;
    r.assert_refused(400, "Parameter verification failed.");
    r.assert_param_error("tags", "invalid format - invalid characters in tag\n");
    for bad in ["-leading", "a:b", "x@y"] {
        let r = s.set_config("pve1", "qemu/100", &[("tags", bad)]).await;
        assert_eq!(r.status, 400, "{bad}");
    }
}

#[tokio::test(start_paused = true)]
async fn tags_are_stored_lowercase_sorted_and_deduplicated() {
    let s = TestSim::cluster();
    let tags = "Web;db, web FLXP.ignore,flxp.anti-affinity.web";
    let r = s.set_config("pve1", "qemu/100", &[("tags", tags)]).await;
    r.assert_ok();
    let want = "db;flxp.anti-affinity.web;flxp.ignore;web";
    assert_eq!(s.config("pve1", "qemu/100").await["tags"], want);
    assert_eq!(s.resource("qemu/100").await["tags"], want);
    let list = s.list("/nodes/pve1/qemu").await;
    let entry = list.iter().find(|e| e["vmid"] == 100).unwrap();
    assert_eq!(entry["tags"], want);
    // Deleting the key removes the tags entirely (absent, not empty).
    let r = s
        .set_config("pve1", "qemu/100", &[("delete", "tags")])
        .await;
    r.assert_ok();
    assert!(s.resource("qemu/100").await.get("tags").is_none());
}

#[tokio::test(start_paused = true)]
async fn tags_change_at_once_on_a_running_vm() {
    let s = TestSim::cluster();
    let r = s.set_config("pve1", "qemu/100", &[("tags", "a")]).await;
    r.assert_ok();
    let cfg = s.get("/nodes/pve1/qemu/100/config?current=1").await;
    assert_eq!(cfg.data()["tags"], "a", "tags are fast-plug, not pending");
}
