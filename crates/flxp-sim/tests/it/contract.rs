//! Contract tests against `tests/fixtures/pve-api-schema.json`: every endpoint the schema lists
//! is either served (and its answer validates against `returns`, in wire mode: numbers as JSON
//! numbers, strings as strings) or named here as not served; and requests built with
//! `flxp-pve`'s parameter types validate against `parameters`.

use std::collections::{BTreeMap, BTreeSet};

use flxp_pve::types::form::to_form;
use flxp_pve::types::{
    CloneParams, ConfigUpdate, CreateParams, DeleteParams, HaMigrateParams, LxcMigrateParams,
    MigratePreconditionQuery, NextIdQuery, NodeConfigUpdate, PermissionsQuery, QemuMigrateParams,
    ResizeParams, ResourceType, ResourcesQuery, RrdCf, RrdQuery, RrdTimeframe, ShutdownParams,
    SizeSpec, StartParams, StopParams, StorageQuery, TaskLogQuery, TicketRequest,
};
use flxp_sim::http::params::collect;
use flxp_sim::schema::{ApiSchema, Mode};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::support::{TestSim, urlencode};

/// Endpoints of the schema file the simulator does not serve, and why.
const NOT_SERVED: [(&str, &str); 2] = [
    (
        "POST /cluster/bulk-action/guest/migrate",
        "flxp migrates guest by guest; answers 501",
    ),
    (
        "POST /nodes/{node}/migrateall",
        "flxp migrates guest by guest; answers 501",
    ),
];

/// Answers that validate only leniently, each a quirk Proxmox itself has (docs/proxmox-behaviour.md
/// §6).
const PERL_TYPED: [(&str, &str); 1] =
    [("GET /cluster/nextid", "nextid is a JSON string on the wire")];

struct Check {
    endpoint: &'static str,
    method: &'static str,
    path: String,
    params: Vec<(&'static str, String)>,
}

fn c(endpoint: &'static str, path: &str, params: &[(&'static str, &str)]) -> Check {
    let method = endpoint.split(' ').next().unwrap();
    Check {
        endpoint,
        method,
        path: path.to_string(),
        params: params.iter().map(|(k, v)| (*k, v.to_string())).collect(),
    }
}

async fn run(s: &TestSim, check: &Check) -> Value {
    let params: Vec<(&str, &str)> = check.params.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let r = match check.method {
        "GET" | "DELETE" => {
            let q = serde_urlencoded::to_string(&params).unwrap();
            let path = if q.is_empty() {
                check.path.clone()
            } else {
                format!("{}?{q}", check.path)
            };
            if check.method == "GET" {
                s.get(&path).await
            } else {
                s.delete(&path).await
            }
        }
        m => s.form(m, &check.path, &params).await,
    };
    assert_eq!(r.status, 200, "{} {} -> {r:?}", check.method, check.path);
    r.json["data"].clone()
}

fn validate(endpoint: &str, data: &Value) {
    let schema = ApiSchema::embedded();
    let entry = schema
        .endpoint(endpoint)
        .unwrap_or_else(|| panic!("{endpoint} not in schema"));
    let mode = if PERL_TYPED.iter().any(|(e, _)| *e == endpoint) {
        Mode::Perl
    } else {
        Mode::Wire
    };
    let errors = schema.check_returns(entry, data, mode);
    assert!(errors.is_empty(), "{endpoint}: {errors:#?}\nin {data:#}");
}

#[tokio::test(start_paused = true)]
async fn every_schema_endpoint_is_served_and_answers_validate() {
    let s = TestSim::cluster();
    let task = s.live_migrate("pve1", "qemu/100", "pve2").await;
    let t = urlencode(&task);
    let checks = vec![
        c("GET /version", "/version", &[]),
        c("GET /cluster/resources", "/cluster/resources", &[]),
        c("GET /cluster/status", "/cluster/status", &[]),
        c("GET /cluster/options", "/cluster/options", &[]),
        c("GET /cluster/nextid", "/cluster/nextid", &[]),
        c("GET /cluster/tasks", "/cluster/tasks", &[]),
        c("GET /cluster/ha/resources", "/cluster/ha/resources", &[]),
        c(
            "GET /cluster/ha/resources/{sid}",
            "/cluster/ha/resources/vm:110",
            &[],
        ),
        c("GET /cluster/ha/rules", "/cluster/ha/rules", &[]),
        c(
            "GET /cluster/ha/status/current",
            "/cluster/ha/status/current",
            &[],
        ),
        c(
            "GET /cluster/ha/status/manager_status",
            "/cluster/ha/status/manager_status",
            &[],
        ),
        c("GET /nodes", "/nodes", &[]),
        c("GET /nodes/{node}/status", "/nodes/pve1/status", &[]),
        c(
            "GET /nodes/{node}/rrddata",
            "/nodes/pve1/rrddata",
            &[("timeframe", "hour")],
        ),
        c("GET /nodes/{node}/storage", "/nodes/pve1/storage", &[]),
        c(
            "GET /nodes/{node}/storage/{storage}/content",
            "/nodes/pve1/storage/local-lvm/content",
            &[("content", "images")],
        ),
        c(
            "GET /nodes/{node}/tasks",
            "/nodes/pve1/tasks",
            &[("source", "all")],
        ),
        c(
            "GET /nodes/{node}/tasks/{upid}/status",
            &format!("/nodes/pve1/tasks/{t}/status"),
            &[],
        ),
        c(
            "GET /nodes/{node}/tasks/{upid}/log",
            &format!("/nodes/pve1/tasks/{t}/log"),
            &[],
        ),
        c("GET /nodes/{node}/qemu", "/nodes/pve1/qemu", &[]),
        c(
            "GET /nodes/{node}/qemu/{vmid}/config",
            "/nodes/pve1/qemu/120/config",
            &[],
        ),
        c(
            "GET /nodes/{node}/qemu/{vmid}/status/current",
            "/nodes/pve1/qemu/110/status/current",
            &[],
        ),
        c(
            "GET /nodes/{node}/qemu/{vmid}/rrddata",
            "/nodes/pve1/qemu/120/rrddata",
            &[("timeframe", "hour")],
        ),
        c(
            "GET /nodes/{node}/qemu/{vmid}/migrate",
            "/nodes/pve1/qemu/101/migrate",
            &[],
        ),
        c("GET /nodes/{node}/lxc", "/nodes/pve2/lxc", &[]),
        c(
            "GET /nodes/{node}/lxc/{vmid}/config",
            "/nodes/pve2/lxc/103/config",
            &[],
        ),
        c(
            "GET /nodes/{node}/lxc/{vmid}/status/current",
            "/nodes/pve2/lxc/103/status/current",
            &[],
        ),
        c(
            "GET /nodes/{node}/lxc/{vmid}/migrate",
            "/nodes/pve2/lxc/103/migrate",
            &[],
        ),
        c("GET /access/ticket", "/access/ticket", &[]),
        c(
            "POST /access/ticket",
            "/access/ticket",
            &[("username", "root@pam"), ("password", "secret")],
        ),
        c("GET /nodes/{node}/config", "/nodes/pve1/config", &[]),
        c("GET /nodes/{node}/version", "/nodes/pve1/version", &[]),
        c("GET /pools", "/pools", &[]),
        c(
            "GET /nodes/{node}/lxc/{vmid}/rrddata",
            "/nodes/pve2/lxc/103/rrddata",
            &[("timeframe", "day")],
        ),
        // Writes, in an order that keeps each valid.
        c(
            "PUT /nodes/{node}/qemu/{vmid}/config",
            "/nodes/pve2/qemu/102/config",
            &[("tags", "a;b")],
        ),
        c(
            "POST /nodes/{node}/qemu/{vmid}/config",
            "/nodes/pve2/qemu/102/config",
            &[("description", "x")],
        ),
        c(
            "PUT /nodes/{node}/lxc/{vmid}/config",
            "/nodes/pve2/lxc/104/config",
            &[("tags", "c")],
        ),
        c(
            "PUT /nodes/{node}/qemu/{vmid}/resize",
            "/nodes/pve2/qemu/102/resize",
            &[("disk", "scsi0"), ("size", "+1G")],
        ),
        c(
            "POST /nodes/{node}/qemu/{vmid}/status/start",
            "/nodes/pve2/qemu/102/status/start",
            &[],
        ),
        c(
            "POST /nodes/{node}/qemu/{vmid}/status/stop",
            "/nodes/pve1/qemu/101/status/stop",
            &[],
        ),
        c(
            "POST /nodes/{node}/qemu/{vmid}/status/shutdown",
            "/nodes/pve1/qemu/120/status/shutdown",
            &[],
        ),
        c(
            "POST /nodes/{node}/lxc/{vmid}/status/start",
            "/nodes/pve2/lxc/104/status/start",
            &[],
        ),
        c(
            "POST /nodes/{node}/lxc/{vmid}/status/shutdown",
            "/nodes/pve2/lxc/103/status/shutdown",
            &[],
        ),
        c(
            "POST /nodes/{node}/lxc/{vmid}/status/stop",
            "/nodes/pve2/lxc/103/status/stop",
            &[],
        ),
        c(
            "POST /nodes/{node}/qemu/{vmid}/clone",
            "/nodes/pve1/qemu/9000/clone",
            &[("newid", "400"), ("target", "pve3")],
        ),
        c(
            "POST /nodes/{node}/qemu",
            "/nodes/pve3/qemu",
            &[("vmid", "401"), ("memory", "1024"), ("scsi0", "ceph:8")],
        ),
        c(
            "POST /nodes/{node}/qemu/{vmid}/migrate",
            "/nodes/pve2/qemu/102/migrate",
            &[("target", "pve3"), ("online", "1")],
        ),
        c(
            "POST /nodes/{node}/lxc/{vmid}/migrate",
            "/nodes/pve2/lxc/104/migrate",
            &[("target", "pve3"), ("restart", "1")],
        ),
        c(
            "PUT /nodes/{node}/config",
            "/nodes/pve3/config",
            &[("description", "flxp.label.ssd")],
        ),
        c(
            "POST /cluster/ha/resources",
            "/cluster/ha/resources",
            &[("sid", "vm:9001"), ("state", "stopped")],
        ),
        c(
            "PUT /cluster/ha/resources/{sid}",
            "/cluster/ha/resources/vm:9001",
            &[("comment", "tpl")],
        ),
        c(
            "POST /cluster/ha/resources/{sid}/migrate",
            "/cluster/ha/resources/vm:110/migrate",
            &[("node", "pve2")],
        ),
        // Node power last: the shutdown takes effect after the shutdown time.
        c("POST /nodes/{node}/wakeonlan", "/nodes/pve3/wakeonlan", &[]),
        c(
            "POST /nodes/{node}/status",
            "/nodes/pve2/status",
            &[("command", "shutdown")],
        ),
        c(
            "POST /cluster/ha/resources/{sid}/relocate",
            "/cluster/ha/resources/vm:110/relocate",
            &[("node", "pve3")],
        ),
        c(
            "POST /cluster/ha/rules",
            "/cluster/ha/rules",
            &[
                ("rule", "big"),
                ("type", "node-affinity"),
                ("resources", "vm:110"),
                ("nodes", "pve1:2,pve2"),
            ],
        ),
        c("GET /cluster/ha/rules/{rule}", "/cluster/ha/rules/big", &[]),
        c(
            "PUT /cluster/ha/rules/{rule}",
            "/cluster/ha/rules/big",
            &[("type", "node-affinity"), ("comment", "prefer pve1")],
        ),
        c(
            "DELETE /cluster/ha/rules/{rule}",
            "/cluster/ha/rules/big",
            &[],
        ),
        c(
            "DELETE /cluster/ha/resources/{sid}",
            "/cluster/ha/resources/vm:9001",
            &[],
        ),
        c(
            "DELETE /nodes/{node}/tasks/{upid}",
            &format!("/nodes/pve1/tasks/{t}"),
            &[],
        ),
        c(
            "DELETE /nodes/{node}/qemu/{vmid}",
            "/nodes/pve1/qemu/9001",
            &[],
        ),
        c(
            "DELETE /nodes/{node}/lxc/{vmid}",
            "/nodes/pve3/lxc/104",
            &[],
        ),
    ];
    let mut seen = BTreeSet::new();
    for check in &checks {
        if check.endpoint == "DELETE /nodes/{node}/lxc/{vmid}" {
            // The container migrated to pve3 above; let that land first (restart mode).
            s.control("POST", "/_sim/advance", json!({"seconds": 60}))
                .await;
            s.post_task("/nodes/pve3/lxc/104/status/stop", &[]).await;
            s.control("POST", "/_sim/advance", json!({"seconds": 5}))
                .await;
        }
        let data = run(&s, check).await;
        validate(check.endpoint, &data);
        seen.insert(check.endpoint);
    }
    // The pool answer needs a pool with members.
    let mut doc = crate::support::cluster();
    doc["resources"][9]["pool"] = json!("web");
    let p = TestSim::new(doc);
    validate(
        "GET /pools/{poolid}",
        &run(&p, &c("GET /pools/{poolid}", "/pools/web", &[])).await,
    );
    seen.insert("GET /pools/{poolid}");
    validate(
        "GET /access/permissions",
        &run(
            &s,
            &c("GET /access/permissions", "/access/permissions", &[]),
        )
        .await,
    );
    seen.insert("GET /access/permissions");

    let not_served: BTreeSet<&str> = NOT_SERVED.iter().map(|(e, _)| *e).collect();
    let missing: Vec<&String> = ApiSchema::embedded()
        .endpoint_keys()
        .filter(|k| !seen.contains(k.as_str()) && !not_served.contains(k.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "schema endpoints neither checked nor listed as not served: {missing:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn offline_guests_and_ha_views_validate_too() {
    let s = TestSim::cluster();
    s.control(
        "POST",
        "/_sim/nodes/pve1/maintenance",
        json!({"enable": true}),
    )
    .await;
    s.control(
        "POST",
        "/_sim/nodes/pve3/status",
        json!({"status": "offline"}),
    )
    .await;
    for (e, p) in [
        ("GET /cluster/resources", "/cluster/resources"),
        ("GET /nodes", "/nodes"),
        (
            "GET /cluster/ha/status/current",
            "/cluster/ha/status/current",
        ),
        (
            "GET /cluster/ha/status/manager_status",
            "/cluster/ha/status/manager_status",
        ),
        ("GET /cluster/status", "/cluster/status"),
    ] {
        validate(e, &run(&s, &c(e, p, &[])).await);
    }
}

/// Form-encodes a client parameter struct and decodes it as the simulator does.
fn decoded<T: Serialize>(params: &T, path: &[(&str, &str)]) -> Map<String, Value> {
    let form = to_form(params).unwrap();
    let mut map = collect(None, None, form.as_bytes()).unwrap();
    for (k, v) in path {
        map.insert(k.to_string(), json!(v));
    }
    map
}

fn assert_params(endpoint: &str, params: Map<String, Value>) {
    let schema = ApiSchema::embedded();
    let errors = schema.check_params(schema.endpoint(endpoint).unwrap(), &params);
    assert!(errors.is_empty(), "{endpoint}: {errors:?} for {params:?}");
}

#[test]
fn requests_built_with_the_client_types_validate_against_the_schema() {
    let node = [("node", "pve1")];
    let guest = [("node", "pve1"), ("vmid", "100")];
    assert_params(
        "POST /access/ticket",
        decoded(
            &TicketRequest {
                username: "root@pam".into(),
                password: "s3cret".into(),
                realm: None,
                otp: None,
            },
            &[],
        ),
    );
    assert_params(
        "GET /access/permissions",
        decoded(
            &PermissionsQuery {
                path: Some("/".into()),
                userid: None,
            },
            &[],
        ),
    );
    for kind in [
        ResourceType::Vm,
        ResourceType::Node,
        ResourceType::Storage,
        ResourceType::Sdn,
    ] {
        assert_params(
            "GET /cluster/resources",
            decoded(&ResourcesQuery { kind: Some(kind) }, &[]),
        );
    }
    assert_params(
        "GET /cluster/nextid",
        decoded(&NextIdQuery { vmid: Some(2004) }, &[]),
    );
    for frame in [
        RrdTimeframe::Hour,
        RrdTimeframe::Day,
        RrdTimeframe::Week,
        RrdTimeframe::Month,
        RrdTimeframe::Year,
    ] {
        let q = RrdQuery {
            timeframe: frame,
            cf: Some(RrdCf::Max),
        };
        assert_params("GET /nodes/{node}/rrddata", decoded(&q, &node));
        assert_params("GET /nodes/{node}/qemu/{vmid}/rrddata", decoded(&q, &guest));
    }
    assert_params(
        "GET /nodes/{node}/storage",
        decoded(
            &StorageQuery {
                content: Some("images".into()),
                enabled: Some(true),
                storage: None,
                target: Some("pve2".into()),
            },
            &node,
        ),
    );
    assert_params(
        "GET /nodes/{node}/tasks/{upid}/log",
        decoded(
            &TaskLogQuery {
                start: Some(0),
                limit: Some(50),
            },
            &[
                ("node", "pve1"),
                (
                    "upid",
                    "UPID:pve1:0001E0A1:00000064:692A9B80:qmigrate:100:root@pam!flxp:",
                ),
            ],
        ),
    );
    assert_params(
        "GET /nodes/{node}/qemu/{vmid}/migrate",
        decoded(
            &MigratePreconditionQuery {
                target: Some("pve2".into()),
            },
            &guest,
        ),
    );
    let migrate = QemuMigrateParams {
        target: "pve2".into(),
        online: Some(true),
        with_local_disks: Some(true),
        targetstorage: Some("ceph".into()),
        bwlimit: Some(102_400),
    };
    assert_params(
        "POST /nodes/{node}/qemu/{vmid}/migrate",
        decoded(&migrate, &guest),
    );
    let lxc = LxcMigrateParams {
        target: "pve2".into(),
        restart: Some(true),
        timeout: Some(180),
        target_storage: Some("local-lvm".into()),
        bwlimit: Some(1000),
    };
    assert_params(
        "POST /nodes/{node}/lxc/{vmid}/migrate",
        decoded(&lxc, &guest),
    );
    let clone = CloneParams {
        newid: 4242,
        name: Some("web-42".into()),
        target: Some("pve2".into()),
        full: Some(false),
        pool: Some("web".into()),
        description: Some("from template".into()),
        ..CloneParams::default()
    };
    assert_params(
        "POST /nodes/{node}/qemu/{vmid}/clone",
        decoded(&clone, &guest),
    );
    let create = CreateParams {
        vmid: 4243,
        storage: Some("ceph".into()),
        pool: None,
        start: Some(true),
        ha_managed: Some(false),
        config: BTreeMap::from([
            ("memory".to_string(), "2048".to_string()),
            ("cores".to_string(), "2".to_string()),
            (
                "net0".to_string(),
                "virtio,bridge=vmbr0,firewall=1".to_string(),
            ),
            ("scsi0".to_string(), "ceph:32".to_string()),
            ("tags".to_string(), "flxp.affinity.web;web".to_string()),
            (
                "sshkeys".to_string(),
                flxp_pve::types::form::encode_sshkeys("ssh-ed25519 AAAAC3Nz+/= user@host"),
            ),
        ]),
    };
    assert_params("POST /nodes/{node}/qemu", decoded(&create, &node));
    assert_params(
        "POST /nodes/{node}/qemu/{vmid}/status/start",
        decoded(&StartParams { timeout: Some(60) }, &guest),
    );
    assert_params(
        "POST /nodes/{node}/qemu/{vmid}/status/shutdown",
        decoded(
            &ShutdownParams {
                timeout: Some(60),
                force_stop: Some(true),
            },
            &guest,
        ),
    );
    assert_params(
        "POST /nodes/{node}/qemu/{vmid}/status/stop",
        decoded(
            &StopParams {
                timeout: Some(10),
                overrule_shutdown: Some(true),
            },
            &guest,
        ),
    );
    assert_params(
        "DELETE /nodes/{node}/qemu/{vmid}",
        decoded(
            &DeleteParams {
                purge: Some(true),
                destroy_unreferenced_disks: Some(true),
            },
            &guest,
        ),
    );
    let update = ConfigUpdate::new()
        .with("tags", "flxp.anti-affinity.db;db")
        .with("ipconfig0", "ip=10.0.0.5/24,gw=10.0.0.1")
        .with_delete("description")
        .with_digest("0123456789abcdef0123456789abcdef01234567");
    assert_params(
        "PUT /nodes/{node}/qemu/{vmid}/config",
        decoded(&update, &guest),
    );
    assert_params(
        "PUT /nodes/{node}/qemu/{vmid}/resize",
        decoded(
            &ResizeParams::to_size("scsi0", 64 << 30)
                .with_digest("0123456789abcdef0123456789abcdef01234567"),
            &guest,
        ),
    );
    assert_params(
        "PUT /nodes/{node}/qemu/{vmid}/resize",
        decoded(
            &ResizeParams {
                disk: "virtio15".into(),
                size: SizeSpec::Grow((1 << 30) + 1),
                digest: None,
                skiplock: Some(true),
            },
            &guest,
        ),
    );
    assert_params(
        "PUT /nodes/{node}/lxc/{vmid}/config",
        decoded(&ConfigUpdate::new().with("tags", "x"), &guest),
    );
    assert_params(
        "POST /cluster/ha/resources/{sid}/migrate",
        decoded(
            &HaMigrateParams {
                node: "pve2".into(),
            },
            &[("sid", "vm:100")],
        ),
    );
    assert_params(
        "POST /nodes/{node}/status",
        decoded(
            &flxp_pve::types::NodeCommandParams {
                command: flxp_pve::types::NodeCommand::Shutdown,
            },
            &node,
        ),
    );
    assert_params(
        "PUT /nodes/{node}/config",
        decoded(
            &NodeConfigUpdate {
                description: Some("flxp.label.ssd".into()),
                delete: None,
                digest: None,
            },
            &node,
        ),
    );
}

#[test]
fn the_contract_check_catches_answers_that_break_the_schema() {
    let schema = ApiSchema::embedded();
    let resources = schema.endpoint("GET /cluster/resources").unwrap();
    let good = json!([{"id": "qemu/100", "type": "qemu", "vmid": 100, "template": 0, "cpu": 0.5}]);
    assert!(
        schema
            .check_returns(resources, &good, Mode::Wire)
            .is_empty()
    );
    let bad =
        json!([{"id": "qemu/100", "type": "vm", "vmid": "100", "template": "yes", "cpu": "high"}]);
    let errors = schema.check_returns(resources, &bad, Mode::Wire);
    for path in ["[0].type", "[0].vmid", "[0].template", "[0].cpu"] {
        assert!(errors.contains_key(path), "{path} not caught: {errors:?}");
    }
    let missing_id = json!([{"type": "qemu"}]);
    assert_eq!(
        schema.check_returns(resources, &missing_id, Mode::Wire)["[0].id"],
        "property is missing and it is not optional"
    );
    let status = schema
        .endpoint("GET /nodes/{node}/tasks/{upid}/status")
        .unwrap();
    let e = schema.check_returns(status, &json!({"upid": "x", "status": "done"}), Mode::Wire);
    assert!(e.contains_key("status") && e.contains_key("pid"), "{e:?}");
    // `$ref` into defs is followed: a local disk with a string size fails.
    let pre = schema
        .endpoint("GET /nodes/{node}/qemu/{vmid}/migrate")
        .unwrap();
    let e = schema.check_returns(
        pre,
        &json!({"running": 1, "local_disks": [{"volid": "a", "size": "big"}], "local_resources": [],
                "mapped-resources": [], "mapped-resource-info": {}, "has-dbus-vmstate": 1}),
        Mode::Wire,
    );
    assert!(e.keys().any(|k| k.starts_with("local_disks[0]")), "{e:?}");
}
