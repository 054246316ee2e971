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

use crate::support::{TestSim, cluster_with, urlencode};

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

/// One request of the contract check: the schema endpoint it exercises and what it sends.
struct Check {
    endpoint: String,
    method: String,
    path: String,
    params: Vec<(String, String)>,
}

/// A check written as `METHOD /template/{placeholder} value... ?key=value&key=value`: the endpoint
/// is `METHOD /template/{placeholder}`, the path fills the placeholders in order with the values,
/// and the parameters follow `?` as written (not percent-encoded).
fn c(spec: &str) -> Check {
    let (request, params) = spec.split_once(" ?").unwrap_or((spec, ""));
    let mut words = request.split_whitespace();
    let method = words.next().unwrap().to_string();
    let template = words.next().unwrap();
    let mut path = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let close = open + rest[open..].find('}').unwrap();
        path.push_str(&rest[..open]);
        path.push_str(
            words
                .next()
                .unwrap_or_else(|| panic!("{spec}: too few values")),
        );
        rest = &rest[close + 1..];
    }
    path.push_str(rest);
    assert!(words.next().is_none(), "{spec}: too many values");
    let params = params
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            (k.to_string(), v.to_string())
        })
        .collect();
    Check {
        endpoint: format!("{method} {template}"),
        method,
        path,
        params,
    }
}

async fn run(s: &TestSim, check: &Check) -> Value {
    let params: Vec<(&str, &str)> = (check.params.iter())
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let r = match check.method.as_str() {
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

/// Runs `check` on `s` and validates its answer: the endpoint it checked.
async fn check(s: &TestSim, check: &Check) -> String {
    validate(&check.endpoint, &run(s, check).await);
    check.endpoint.clone()
}

#[tokio::test(start_paused = true)]
async fn every_schema_endpoint_is_served_and_answers_validate() {
    let s = TestSim::cluster();
    let task = s.live_migrate("pve1", "qemu/100", "pve2").await;
    // The endpoints of the migration's task, on the node the UPID names.
    let on_task = |endpoint: &str| c(&format!("{endpoint} pve1 {}", urlencode(&task)));
    let checks = vec![
        c("GET /version"),
        c("GET /cluster/resources"),
        c("GET /cluster/status"),
        c("GET /cluster/options"),
        c("GET /cluster/nextid"),
        c("GET /cluster/tasks"),
        c("GET /cluster/ha/resources"),
        c("GET /cluster/ha/resources/{sid} vm:110"),
        c("GET /cluster/ha/rules"),
        c("GET /cluster/ha/status/current"),
        c("GET /cluster/ha/status/manager_status"),
        c("GET /nodes"),
        c("GET /nodes/{node}/status pve1"),
        c("GET /nodes/{node}/rrddata pve1 ?timeframe=hour"),
        c("GET /nodes/{node}/storage pve1"),
        c("GET /nodes/{node}/storage/{storage}/content pve1 local-lvm ?content=images"),
        c("GET /nodes/{node}/tasks pve1 ?source=all"),
        on_task("GET /nodes/{node}/tasks/{upid}/status"),
        on_task("GET /nodes/{node}/tasks/{upid}/log"),
        c("GET /nodes/{node}/qemu pve1"),
        c("GET /nodes/{node}/qemu/{vmid}/config pve1 120"),
        c("GET /nodes/{node}/qemu/{vmid}/status/current pve1 110"),
        c("GET /nodes/{node}/qemu/{vmid}/rrddata pve1 120 ?timeframe=hour"),
        c("GET /nodes/{node}/qemu/{vmid}/migrate pve1 101"),
        c("GET /nodes/{node}/lxc pve2"),
        c("GET /nodes/{node}/lxc/{vmid}/config pve2 103"),
        c("GET /nodes/{node}/lxc/{vmid}/status/current pve2 103"),
        c("GET /nodes/{node}/lxc/{vmid}/migrate pve2 103"),
        c("GET /access/ticket"),
        c("POST /access/ticket ?username=root@pam&password=secret"),
        c("GET /nodes/{node}/config pve1"),
        c("GET /nodes/{node}/version pve1"),
        c("GET /pools"),
        c("GET /nodes/{node}/lxc/{vmid}/rrddata pve2 103 ?timeframe=day"),
        // Writes, in an order that keeps each valid.
        c("PUT /nodes/{node}/qemu/{vmid}/config pve2 102 ?tags=a;b"),
        c("POST /nodes/{node}/qemu/{vmid}/config pve2 102 ?description=x"),
        c("PUT /nodes/{node}/lxc/{vmid}/config pve2 104 ?tags=c"),
        c("PUT /nodes/{node}/qemu/{vmid}/resize pve2 102 ?disk=scsi0&size=+1G"),
        c("POST /nodes/{node}/qemu/{vmid}/status/start pve2 102"),
        c("POST /nodes/{node}/qemu/{vmid}/status/stop pve1 101"),
        c("POST /nodes/{node}/qemu/{vmid}/status/shutdown pve1 120"),
        c("POST /nodes/{node}/lxc/{vmid}/status/start pve2 104"),
        c("POST /nodes/{node}/lxc/{vmid}/status/shutdown pve2 103"),
        c("POST /nodes/{node}/lxc/{vmid}/status/stop pve2 103"),
        c("POST /nodes/{node}/qemu/{vmid}/clone pve1 9000 ?newid=400&target=pve3"),
        c("POST /nodes/{node}/qemu pve3 ?vmid=401&memory=1024&scsi0=ceph:8"),
        c("POST /nodes/{node}/qemu/{vmid}/migrate pve2 102 ?target=pve3&online=1"),
        c("POST /nodes/{node}/lxc/{vmid}/migrate pve2 104 ?target=pve3&restart=1"),
        c("PUT /nodes/{node}/config pve3 ?description=flxp.label.ssd"),
        c("POST /cluster/ha/resources ?sid=vm:9001&state=stopped"),
        c("PUT /cluster/ha/resources/{sid} vm:9001 ?comment=tpl"),
        c("POST /cluster/ha/resources/{sid}/migrate vm:110 ?node=pve2"),
        // Node power last: the shutdown takes effect after the shutdown time.
        c("POST /nodes/{node}/wakeonlan pve3"),
        c("POST /nodes/{node}/status pve2 ?command=shutdown"),
        c("POST /cluster/ha/resources/{sid}/relocate vm:110 ?node=pve3"),
        c("POST /cluster/ha/rules ?rule=big&type=node-affinity&resources=vm:110&nodes=pve1:2,pve2"),
        c("GET /cluster/ha/rules/{rule} big"),
        c("PUT /cluster/ha/rules/{rule} big ?type=node-affinity&comment=prefer pve1"),
        c("DELETE /cluster/ha/rules/{rule} big"),
        c("DELETE /cluster/ha/resources/{sid} vm:9001"),
        on_task("DELETE /nodes/{node}/tasks/{upid}"),
        c("DELETE /nodes/{node}/qemu/{vmid} pve1 9001"),
        c("DELETE /nodes/{node}/lxc/{vmid} pve3 104"),
    ];
    let mut seen = BTreeSet::new();
    for one in &checks {
        if one.endpoint == "DELETE /nodes/{node}/lxc/{vmid}" {
            // The container migrated to pve3 above; let that land first (restart mode).
            s.control("POST", "/_sim/advance", json!({"seconds": 60}))
                .await;
            s.post_task("/nodes/pve3/lxc/104/status/stop", &[]).await;
            s.control("POST", "/_sim/advance", json!({"seconds": 5}))
                .await;
        }
        seen.insert(check(&s, one).await);
    }
    // The pool answer needs a pool with members.
    let p = cluster_with(|doc| doc["resources"][9]["pool"] = json!("web"));
    seen.insert(check(&p, &c("GET /pools/{poolid} web")).await);
    seen.insert(check(&s, &c("GET /access/permissions")).await);

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
    s.set_maintenance("pve1", true).await;
    s.set_node_status("pve3", "offline").await;
    for e in [
        "GET /cluster/resources",
        "GET /nodes",
        "GET /cluster/ha/status/current",
        "GET /cluster/ha/status/manager_status",
        "GET /cluster/status",
    ] {
        check(&s, &c(e)).await;
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
    let lxc = LxcMigrateParams {
        target: "pve2".into(),
        restart: Some(true),
        timeout: Some(180),
        target_storage: Some("local-lvm".into()),
        bwlimit: Some(1000),
    };
    let clone = CloneParams {
        newid: 4242,
        name: Some("web-42".into()),
        target: Some("pve2".into()),
        full: Some(false),
        pool: Some("web".into()),
        description: Some("from template".into()),
        ..CloneParams::default()
    };
    for (endpoint, params) in [
        (
            "POST /nodes/{node}/qemu/{vmid}/migrate",
            decoded(&migrate, &guest),
        ),
        (
            "POST /nodes/{node}/lxc/{vmid}/migrate",
            decoded(&lxc, &guest),
        ),
        (
            "POST /nodes/{node}/qemu/{vmid}/clone",
            decoded(&clone, &guest),
        ),
    ] {
        assert_params(endpoint, params);
    }
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
