//! The API's acting mutations go through the zone's lease: while another flxp holds it, they are
//! refused `UNAVAILABLE` naming the holder, with nothing written; dry runs still plan.

use flxp_sim::Scenario;
use serde_json::Value;

use super::cli_balance::DEMO;
use super::serve::{self, code, message};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acting_mutations_on_a_zone_another_flxp_holds_are_refused_naming_it() {
    // Another flxp's evacuation holds the lease of lab on pve1 (valid for centuries).
    let mut doc: Value = serde_json::from_str(DEMO).unwrap();
    let notes = doc["nodes"]["pve1"]["notes"].as_str().unwrap().to_owned();
    doc["nodes"]["pve1"]["notes"] = format!(
        "{notes}\n<!-- flxp-lease zone=lab holder=other-host:7:ab expires=9999999999 command=evacuate -->"
    )
    .into();
    let s = serve::start(Scenario::from_value(doc).unwrap(), "", &[]).await;
    let pve4 = s.sim.sim().world().nodes["pve4"].notes.clone();
    let guests = s
        .sim
        .sim()
        .world()
        .guests
        .values()
        .filter(|g| g.node == "pve4")
        .count();
    for mutation in [
        "mutation { maintenance(zone: \"lab\", node: \"pve4\", on: true) }",
        "mutation { evacuate(zone: \"lab\", node: \"pve4\") { executed } }",
        "mutation { rebalance(zone: \"lab\") { executed } }",
    ] {
        let v = s.query(mutation).await;
        assert_eq!(code(&v), "UNAVAILABLE", "{mutation}: {v}");
        assert!(
            message(&v).starts_with(
                "zone lab is held by another flxp (other-host:7:ab, running `flxp evacuate`) until 9999999999"
            ),
            "{mutation}: {v}"
        );
    }
    let world = s.sim.sim().world();
    assert_eq!(world.nodes["pve4"].notes, pve4, "no mark written");
    let now = world.guests.values().filter(|g| g.node == "pve4").count();
    assert_eq!(now, guests, "no guest moved");
    drop(world);
    // Planning needs no lease.
    let v = s
        .query("mutation { evacuate(zone: \"lab\", node: \"pve4\", dryRun: true) { executed } }")
        .await;
    assert!(v["errors"].is_null(), "{v}");
    assert_eq!(v["data"]["evacuate"]["executed"], false, "{v}");
}
