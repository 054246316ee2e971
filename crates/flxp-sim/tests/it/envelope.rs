//! Envelope and error shapes, and Proxmox's request decoding quirks.

use serde_json::json;

use crate::support::TestSim;

#[tokio::test(start_paused = true)]
async fn unknown_paths_and_methods_are_501() {
    let s = TestSim::cluster();
    let r = s.get("/foo").await;
    r.assert_refused(501, "Method 'GET /foo' not implemented");
    assert_eq!(
        r.json,
        json!({"data": null, "message": "Method 'GET /foo' not implemented\n"})
    );
    let r = s.delete("/version").await;
    r.assert_refused(501, "Method 'DELETE /version' not implemented");
}

#[tokio::test(start_paused = true)]
async fn parameter_errors_are_400_with_an_errors_map() {
    let s = TestSim::cluster();
    let r = s.get("/nodes/pve1/rrddata").await;
    r.assert_refused(400, "Parameter verification failed.");
    assert_eq!(
        r.json,
        json!({"data": null, "message": "Parameter verification failed.\n",
               "errors": {"timeframe": "property is missing and it is not optional"}})
    );
    for (query, param, text) in [
        (
            "timeframe=hour&bogus=1",
            "bogus",
            "property is not defined in schema and the schema does not allow additional properties",
        ),
        (
            "timeframe=century",
            "timeframe",
            "value 'century' does not have a value in the enumeration 'hour, day, week, month, year, decade'",
        ),
    ] {
        let r = s.get(&format!("/nodes/pve1/rrddata?{query}")).await;
        assert_eq!(r.json["errors"][param], text);
    }
}

#[tokio::test(start_paused = true)]
async fn booleans_must_be_one_or_zero_in_forms_but_json_may_use_true() {
    let s = TestSim::cluster();
    let params = [("target", "pve2"), ("online", "true")];
    let r = s.post_migrate("pve1", "qemu/100", &params).await;
    r.assert_param_error("online", "type check ('boolean') failed - got 'true'");
    let r = s
        .raw(
            "POST",
            "/nodes/pve1/qemu/100/migrate",
            "application/json",
            r#"{"target":"pve2","online":true}"#,
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.upid().contains(":qmigrate:100:"));
}

#[tokio::test(start_paused = true)]
async fn forms_split_on_semicolons_and_the_query_overrides_the_body() {
    let s = TestSim::cluster();
    let r = s.get("/nodes/pve1/rrddata?timeframe=hour;cf=MAX").await;
    assert_eq!(r.status, 200, "{r:?}");
    let r = s
        .raw(
            "PUT",
            "/nodes/pve2/qemu/102/config?name=from-query",
            "application/x-www-form-urlencoded",
            "name=from-body",
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(s.config("pve2", "qemu/102").await["name"], "from-query");
}

#[tokio::test(start_paused = true)]
async fn failures_are_500_with_the_die_text_as_reason() {
    let s = TestSim::cluster();
    let r = s.get("/nodes/pve2/qemu/100/config").await;
    r.assert_refused(
        500,
        "Configuration file 'nodes/pve2/qemu-server/100.conf' does not exist",
    );
    assert_eq!(
        r.json["message"],
        "Configuration file 'nodes/pve2/qemu-server/100.conf' does not exist\n"
    );
    let r = s.get("/nodes/pve1/lxc/100/config").await;
    r.assert_reason("Configuration file 'nodes/pve1/lxc/100.conf' does not exist");
    let r = s.get("/nodes/pve9/qemu").await;
    r.assert_refused(500, "no such cluster node 'pve9'");
}

#[tokio::test(start_paused = true)]
async fn success_envelope_is_data() {
    let s = TestSim::cluster();
    let r = s.get("/version").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.headers["content-type"], "application/json;charset=UTF-8");
    assert_eq!(r.json["data"]["version"], "9.2.11");
    assert!(r.json.as_object().unwrap().len() == 1);
}
