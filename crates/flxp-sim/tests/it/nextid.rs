//! `GET /cluster/nextid`: lowest free id as a string, `vmid` checks.

use serde_json::json;

use crate::support::TestSim;

#[tokio::test(start_paused = true)]
async fn nextid_is_the_lowest_free_id_as_a_string() {
    let s = TestSim::cluster();
    assert_eq!(s.get("/cluster/nextid").await.data(), &json!("105"));
    assert_eq!(
        s.get("/cluster/nextid?vmid=150").await.data(),
        &json!("150")
    );
    let r = s.get("/cluster/nextid?vmid=100").await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json["errors"]["vmid"], "VM 100 already exists");
    let r = s.get("/cluster/nextid?vmid=99").await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json["errors"]["vmid"],
        "invalid format - value does not look like a valid VM ID\n"
    );
}

#[tokio::test(start_paused = true)]
async fn nextid_is_not_a_reservation_but_follows_creations() {
    let s = TestSim::cluster();
    let id = s
        .get("/cluster/nextid")
        .await
        .data()
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        s.get("/cluster/nextid").await.data().as_str().unwrap(),
        id,
        "asking twice gives the same id"
    );
    s.post_task("/nodes/pve1/qemu/9000/clone", &[("newid", &id)])
        .await;
    assert_eq!(s.get("/cluster/nextid").await.data(), &json!("106"));
}
