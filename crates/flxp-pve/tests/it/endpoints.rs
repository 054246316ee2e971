//! Each endpoint sends the method, path, query and body Proxmox expects, and reads its answer.

use serde_json::json;

use flxp_pve::types::{
    CloneParams, DeleteParams, GuestKind, HaMigrateParams, LxcMigrateParams, RrdCf, RrdQuery,
    RrdTimeframe, TaskLogQuery, Upid,
};
use flxp_pve::{Error, TaskWait};

use crate::server::{Reply, start};

const UPID: &str = "UPID:pve2:000A1B2C:0123ABCD:6929A5C0:qmigrate:105:root@pam!flxp:";

#[tokio::test]
async fn reads_use_get_with_query_strings() {
    let s = start(None, |seen, _| match seen.path.as_str() {
        "/api2/json/cluster/nextid" => Reply::data(json!("2004")),
        "/api2/json/nodes/pve1/rrddata" => Reply::data(json!([
            {"time": 1764399900, "cpu": 0.1},
            {"time": 1764399960, "cpu": "0.2", "memused": 1024}
        ])),
        "/api2/json/cluster/resources" => Reply::data(json!([
            {"id": "qemu/105", "type": "qemu", "vmid": "105", "node": "pve1", "template": 0}
        ])),
        _ => Reply::error(501, "Method not implemented", None),
    })
    .await;
    let c = crate::client(&[s.host()]);
    assert_eq!(c.next_id(None).await.unwrap(), 2004);
    assert_eq!(c.next_id(Some(2004)).await.unwrap(), 2004);
    let rows = c
        .node_rrddata(
            "pve1",
            &RrdQuery {
                timeframe: RrdTimeframe::Hour,
                cf: Some(RrdCf::Average),
            },
        )
        .await
        .unwrap();
    assert_eq!(rows[1].get("cpu"), Some(0.2));
    let r = c
        .cluster_resources(Some(flxp_pve::types::ResourceType::Vm))
        .await
        .unwrap();
    assert_eq!(r[0].vmid, Some(105));
    let seen = s.seen();
    let queries: Vec<(&str, &str, &str)> = seen
        .iter()
        .map(|x| (x.method.as_str(), x.path.as_str(), x.query.as_str()))
        .collect();
    assert_eq!(
        queries,
        [
            ("GET", "/api2/json/cluster/nextid", ""),
            ("GET", "/api2/json/cluster/nextid", "vmid=2004"),
            (
                "GET",
                "/api2/json/nodes/pve1/rrddata",
                "timeframe=hour&cf=AVERAGE"
            ),
            ("GET", "/api2/json/cluster/resources", "type=vm"),
        ]
    );
    assert!(seen.iter().all(|x| x.body.is_empty()));
}

#[tokio::test]
async fn writes_send_form_bodies_and_read_upids() {
    let s = start(None, |seen, _| match seen.path.as_str() {
        "/api2/json/cluster/ha/resources/vm:100/migrate" => Reply::data(json!({
            "sid": "vm:100", "requested-node": "pve3"
        })),
        _ => Reply::data(json!(UPID)),
    })
    .await;
    let c = crate::client(&[s.host()]);
    let lxc = LxcMigrateParams {
        target: "pve1".into(),
        restart: Some(true),
        ..Default::default()
    };
    assert_eq!(
        c.migrate_lxc("pve2", 106, &lxc).await.unwrap().as_str(),
        UPID
    );
    let clone = CloneParams {
        newid: 120,
        name: Some("web-server".into()),
        full: Some(true),
        target: Some("pve2".into()),
        ..Default::default()
    };
    c.clone_qemu("pve1", 9000, &clone).await.unwrap();
    c.delete_guest(
        "pve1",
        GuestKind::Qemu,
        120,
        &DeleteParams {
            purge: Some(true),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let ha = c
        .ha_migrate(
            "vm:100",
            &HaMigrateParams {
                node: "pve3".into(),
            },
        )
        .await
        .unwrap();
    assert_eq!(ha.requested_node.as_deref(), Some("pve3"));
    let seen = s.seen();
    let calls: Vec<(&str, &str, &str, &str)> = seen
        .iter()
        .map(|x| {
            (
                x.method.as_str(),
                x.path.as_str(),
                x.query.as_str(),
                x.body.as_str(),
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            (
                "POST",
                "/api2/json/nodes/pve2/lxc/106/migrate",
                "",
                "target=pve1&restart=1"
            ),
            (
                "POST",
                "/api2/json/nodes/pve1/qemu/9000/clone",
                "",
                "newid=120&name=web-server&target=pve2&full=1"
            ),
            ("DELETE", "/api2/json/nodes/pve1/qemu/120", "purge=1", ""),
            (
                "POST",
                "/api2/json/cluster/ha/resources/vm:100/migrate",
                "",
                "node=pve3"
            ),
        ]
    );
}

#[tokio::test]
async fn task_calls_go_to_the_node_in_the_upid() {
    let s = start(None, |seen, i| {
        if seen.path.ends_with("/log") {
            return Reply::data(json!([
                {"n": 1, "t": "starting migration of VM 105 to node 'pve3'"},
                {"n": 2, "t": "migration aborted"},
                {"n": 3, "t": "TASK ERROR: migration aborted"}
            ]));
        }
        if i < 2 {
            Reply::data(
                json!({"upid": UPID, "node": "pve2", "status": "running", "type": "qmigrate"}),
            )
        } else {
            Reply::data(json!({"upid": UPID, "node": "pve2", "status": "stopped",
                               "exitstatus": "migration aborted"}))
        }
    })
    .await;
    let c = crate::client(&[s.host()]);
    let upid: Upid = UPID.parse().unwrap();
    let wait = TaskWait {
        interval: std::time::Duration::from_millis(5),
        timeout: None,
        log_lines: 2,
    };
    let e = c.wait_task(&upid, &wait).await.unwrap_err();
    let Error::TaskFailed {
        exitstatus, log, ..
    } = &e
    else {
        panic!("{e:?}")
    };
    assert_eq!(exitstatus, "migration aborted");
    assert_eq!(log, &["migration aborted", "TASK ERROR: migration aborted"]);
    let seen = s.seen();
    let status_path = format!("/api2/json/nodes/pve2/tasks/{UPID}/status");
    assert_eq!(seen.iter().filter(|x| x.path == status_path).count(), 3);
    assert_eq!(
        seen[3].path,
        format!("/api2/json/nodes/pve2/tasks/{UPID}/log")
    );
    assert_eq!(seen[3].query, "start=0&limit=1000");
    let log = c
        .task_log(
            &upid,
            &TaskLogQuery {
                start: Some(1),
                limit: Some(1),
            },
        )
        .await
        .unwrap();
    assert_eq!(log.len(), 3, "the scripted server ignores paging");
}

#[tokio::test]
async fn a_resize_is_a_form_encoded_put_answered_by_a_task_or_by_nothing() {
    use flxp_pve::types::{ResizeParams, SizeSpec};

    const RESIZE: &str = "UPID:pve1:000A1B2D:0123ABCE:6929A5C1:resize:120:root@pam!flxp:";
    // PVE 8 and later answer a task; PVE 7 resized before answering and gives null.
    let s = start(None, |seen, _| {
        if seen.path.ends_with("/121/resize") {
            Reply::data(json!(null))
        } else {
            Reply::data(json!(RESIZE))
        }
    })
    .await;
    let c = crate::client(&[s.host()]);
    let grown = c
        .resize_disk("pve1", 120, &ResizeParams::to_size("scsi0", 64 << 30))
        .await
        .unwrap();
    assert_eq!(grown.map(|u| u.to_string()).as_deref(), Some(RESIZE));
    let relative = ResizeParams {
        disk: "virtio0".into(),
        size: SizeSpec::Grow(512 << 20),
        digest: None,
        skiplock: None,
    }
    .with_digest("0123456789abcdef0123456789abcdef01234567");
    assert_eq!(c.resize_disk("pve1", 121, &relative).await.unwrap(), None);
    let seen = s.seen();
    let calls: Vec<(&str, &str, &str, Option<&str>, &str)> = seen
        .iter()
        .map(|x| {
            (
                x.method.as_str(),
                x.path.as_str(),
                x.query.as_str(),
                x.content_type.as_deref(),
                x.body.as_str(),
            )
        })
        .collect();
    let form = Some("application/x-www-form-urlencoded");
    assert_eq!(
        calls,
        [
            (
                "PUT",
                "/api2/json/nodes/pve1/qemu/120/resize",
                "",
                form,
                "disk=scsi0&size=64G"
            ),
            (
                "PUT",
                "/api2/json/nodes/pve1/qemu/121/resize",
                "",
                form,
                "disk=virtio0&size=%2B512M&digest=0123456789abcdef0123456789abcdef01234567"
            ),
        ]
    );
}

#[tokio::test]
async fn a_resize_answer_that_is_neither_a_upid_nor_null_is_a_bad_response() {
    use flxp_pve::types::ResizeParams;

    let s = start(None, |_, _| Reply::data(json!("done"))).await;
    let c = crate::client(&[s.host()]);
    let e = c
        .resize_disk("pve1", 120, &ResizeParams::to_size("scsi0", 64 << 30))
        .await
        .unwrap_err();
    let Error::BadResponse { endpoint, message } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(endpoint, "/nodes/pve1/qemu/120/resize");
    assert!(message.contains("UPID"), "{message}");
}
