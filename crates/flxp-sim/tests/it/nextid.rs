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
    for (vmid, text) in [
        ("100", "VM 100 already exists"),
        (
            "99",
            "invalid format - value does not look like a valid VM ID\n",
        ),
    ] {
        let r = s.get(&format!("/cluster/nextid?vmid={vmid}")).await;
        r.assert_param_error("vmid", text);
    }
}

#[tokio::test(start_paused = true)]
async fn nextid_is_not_a_reservation_but_follows_creations() {
    let s = TestSim::cluster();
    let id = s.get_data("/cluster/nextid").await;
    let id = id.as_str().unwrap();
    assert_eq!(
        s.get_data("/cluster/nextid").await.as_str().unwrap(),
        id,
        "asking twice gives the same id"
    );
    s.clone_guest("pve1", "9000", &[("newid", id)]).await;
    assert_eq!(s.get("/cluster/nextid").await.data(), &json!("106"));
}
