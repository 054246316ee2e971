//! Least privilege end to end: the simulator holds a token with exactly a documented role (the
//! privileges `flxp setup token` prints, from flxp-pve's one definition). Each feature works with
//! its role; without any one privilege `config check` names it, and the feature is refused with
//! Proxmox's message naming it.

use std::collections::BTreeSet;

use flxp_pve::privileges::{Feature, privilege_names, requirements};
use flxp_sim::Scenario;
use serde_json::json;

use super::serve::{self, CATALOG};
use super::{TlsZone, assert_contains_all, run, temp_file, tls_zone};

const TOKEN: &str = "flxp@pve!flxp=0b6f1c2e-4d3a-4e5f-8a9b-1c2d3e4f5a6b";
/// Daemon off: the zone is only read (and, with the catalog, used for createVM).
const NO_DAEMON: &str = "[daemon]\nrebalance = false\nevacuate = false\n";

fn set(features: &[Feature]) -> BTreeSet<Feature> {
    features.iter().copied().collect()
}

/// The privileges of the role for `features`.
fn role(features: &[Feature]) -> Vec<String> {
    privilege_names(&set(features))
        .into_iter()
        .map(str::to_owned)
        .collect()
}

fn without(privs: &[String], gone: &str) -> Vec<String> {
    privs.iter().filter(|p| *p != gone).cloned().collect()
}

fn zone(privs: Vec<String>, extra: &str) -> TlsZone {
    zone_at(privs, extra, 200.0)
}

/// The demo scenario over HTTPS (pinned) whose only token holds `privs`, at `time_scale`.
fn zone_at(privs: Vec<String>, extra: &str, time_scale: f64) -> TlsZone {
    let mut scenario = Scenario::demo();
    scenario
        .sim
        .tokens
        .push(json!({ "token": TOKEN, "privs": privs }));
    scenario.sim.time_scale = Some(time_scale);
    tls_zone(scenario, TOKEN, extra)
}

#[test]
fn config_check_accepts_each_role_and_names_every_missing_privilege() {
    let create_only = format!("{NO_DAEMON}{CATALOG}");
    let cases: [(&[Feature], &str); 5] = [
        (&[Feature::Read], NO_DAEMON),
        (&[Feature::Balance], ""),
        (&[Feature::Create], &create_only),
        (&[Feature::Balance, Feature::Create], CATALOG),
        (&[Feature::Power], "[consolidate]\nshutdown = true\n"),
    ];
    for (features, extra) in cases {
        let privs = role(features);
        let z = zone(privs.clone(), extra);
        let (code, out, err) = run(&["config", "check", "--config", z.cfg()]);
        assert_eq!(code, 0, "{features:?}: {out}{err}");
        assert!(
            out.contains("certificate matches the pinned fingerprint"),
            "{out}"
        );
        assert!(out.contains("token has every privilege"), "{out}");
        for p in &privs {
            let z = zone(without(&privs, p), extra);
            let (code, out, _) = run(&["config", "check", "--config", z.cfg()]);
            assert_eq!(code, 1, "{features:?} without {p}: {out}");
            assert!(
                out.contains(&format!("missing privilege {p} on ")),
                "{features:?} without {p}: {out}"
            );
        }
    }
}

#[test]
fn config_check_places_file_mistakes_and_reports_unreachable_zones() {
    let (_d, cfg) = temp_file("flxp.toml", "[zones.lab]\nhosts = []\n");
    let (code, _, err) = run(&["config", "check", "--config", cfg.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("flxp.toml:2:1: zones.lab.hosts"), "{err}");

    let text = "[zones.lab]\nhosts = [\"http://127.0.0.1:1\"]\ntoken = \"flxp@pve!flxp\"\ntoken-secret = \"x\"\ntimeout-secs = 2\n";
    let (_d, cfg) = temp_file("flxp.toml", text);
    let (code, out, err) = run(&["config", "check", "--config", cfg.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("zone lab: cannot connect"), "{out}");
}

#[test]
fn config_check_runs_serves_live_checks_and_warns_of_unknown_nodes() {
    let read = role(&[Feature::Read]);
    // What `serve` refuses at start against the live zone, with the same placed message.
    let z = zone(
        read.clone(),
        &format!("{NO_DAEMON}[storage-profiles.fast]\nstorage = \"nvme\"\ndisk = \"32GiB\"\n"),
    );
    let (code, out, err) = run(&["config", "check", "--config", z.cfg()]);
    assert_eq!(code, 1, "{out}{err}");
    let want = format!(
        "config file {}:10:1: storage-profiles.fast.storage: storage \"nvme\" exists in no zone (lab); storages: ceph, local, local-lvm",
        z.cfg()
    );
    assert!(out.lines().any(|l| l == want), "{out}");
    // A per-node setting for a node the zone does not have is a warning naming both.
    let z = zone(
        read,
        &format!("{NO_DAEMON}[placement]\nnode-reserve = {{ pve9 = \"1G\" }}\n"),
    );
    let (code, out, err) = run(&["config", "check", "--config", z.cfg()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("warning: placement.node-reserve names node \"pve9\", which is not in zone lab (nodes: pve1, pve2, pve3, pve4)"),
        "{out}"
    );
    // A refusal of one command only is a note: a config for `flxp daemon` needs no API token.
    assert!(
        out.contains("note: flxp serve would refuse to start: no API token: set [api].tokens in the config file or FLXP_API_TOKEN"),
        "{out}"
    );
}

#[test]
fn config_check_names_a_lease_node_that_is_not_in_the_cluster() {
    let privs = role(&[Feature::Read]);
    let z = zone(
        privs.clone(),
        &format!("lease-node = \"pve2\"\n{NO_DAEMON}"),
    );
    let (code, out, err) = run(&["config", "check", "--config", z.cfg()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("zone lab: lease-node pve2 is a member of the cluster"),
        "{out}"
    );

    // An offline member is no mistake in the file, but the line says the lease waits for it.
    let mut scenario = Scenario::demo();
    scenario
        .sim
        .tokens
        .push(json!({ "token": TOKEN, "privs": privs.clone() }));
    for r in &mut scenario.snapshot.resources {
        if r.id.as_deref() == Some("node/pve4") {
            r.status = Some("offline".into());
        }
    }
    let z = tls_zone(
        scenario,
        TOKEN,
        &format!("lease-node = \"pve4\"\n{NO_DAEMON}"),
    );
    let (code, out, err) = run(&["config", "check", "--config", z.cfg()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("lease-node pve4 is a member of the cluster, but offline now"),
        "{out}"
    );

    let z = zone(privs, &format!("lease-node = \"pve9\"\n{NO_DAEMON}"));
    let (code, out, err) = run(&["config", "check", "--config", z.cfg()]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("zone lab: lease-node pve9 is not a node of this cluster (its nodes: pve1, pve2, pve3, pve4)"),
        "{out}"
    );
    assert!(out.contains("1 problem(s) found"), "{out}");

    // `flxp serve` and `flxp daemon` refuse it at start, with the same words at the same key.
    let want = format!(
        "config file {}:6:1: zones.lab.lease-node: lease-node pve9 is not a node of this cluster (its nodes: pve1, pve2, pve3, pve4)",
        z.cfg()
    );
    for command in ["serve", "daemon"] {
        let mut cmd = match command {
            "serve" => super::serve_command::serve_command(&z.config),
            _ => {
                let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_flxp"));
                c.args(["daemon", "--config", z.cfg()])
                    .env_remove("FLXP_CONFIG");
                c
            }
        };
        let (code, err) = exit_within(
            cmd.env("FLXP_API_TOKEN", "lease-node-test-operator-token")
                .env("RUST_LOG", "warn"),
        );
        assert_eq!(code, Some(1), "{command} started: {err}");
        assert!(err.contains(&want), "{command}: {err}");
    }
}

/// Runs `cmd` for up to 60 seconds: its exit code (`None` if still running, then killed) and
/// its stderr.
fn exit_within(cmd: &mut std::process::Command) -> (Option<i32>, String) {
    use std::io::Read;
    let mut child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if start.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (code, err)
}

#[test]
fn reading_works_with_the_read_role_and_names_sys_audit_when_it_is_missing() {
    let read = role(&[Feature::Read]);
    let z = zone(read.clone(), NO_DAEMON);
    let (code, out, err) = run(&["status", "--zone", "lab", "--config", z.cfg(), "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("pve1"), "{out}");

    // flxp reads on without the parts Proxmox refuses (notes, rrddata, HA), each refusal logged
    // with Proxmox's message; `config check` names the privilege beforehand.
    let z = zone(without(&read, "Sys.Audit"), NO_DAEMON);
    let (_, _, err) = run(&["status", "--zone", "lab", "--config", z.cfg()]);
    assert!(
        err.contains("Permission check failed (/nodes/pve1, Sys.Audit)"),
        "{err}"
    );
    assert!(
        err.contains("Permission check failed (/, Sys.Audit)"),
        "{err}"
    );

    // Without VM.Audit Proxmox hides the guests instead of refusing: flxp sees none, which is why
    // `config check` asks for the privilege by name.
    let z = zone(without(&read, "VM.Audit"), NO_DAEMON);
    let (code, out, err) = run(&["status", "--zone", "lab", "--config", z.cfg(), "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["guests"], 0, "{out}");
}

#[test]
fn evacuation_works_with_the_balance_role_and_is_refused_without_vm_migrate() {
    let balance = role(&[Feature::Balance]);
    let z = zone(without(&balance, "VM.Migrate"), "");
    let (code, out, err) = run(&["evacuate", "pve1", "--zone", "lab", "--config", z.cfg()]);
    assert_ne!(code, 0, "{out}{err}");
    let both = format!("{out}{err}");
    assert!(both.contains("Permission check failed (/vms/"), "{both}");
    assert!(both.contains("VM.Migrate)"), "{both}");

    let z = zone(balance, "");
    let (code, out, err) = run(&["evacuate", "pve1", "--zone", "lab", "--config", z.cfg()]);
    assert_eq!(code, 0, "{out}{err}");
}

#[test]
fn consolidation_switches_nodes_off_with_the_power_role_and_names_sys_power_mgmt_without_it() {
    let extra = "[migration]\npoll-secs = 1\n\n[consolidate]\nshutdown = true\n";
    let args = |cfg: &str| run(&["consolidate", "--zone", "lab", "--config", cfg, "--json"]);
    // The balance role has no power management: switching nodes off is refused, naming it.
    let balance = role(&[Feature::Balance]);
    assert!(!balance.iter().any(|p| p == "Sys.PowerMgmt"), "{balance:?}");
    let z = zone_at(balance, extra, 100_000.0);
    let (code, out, err) = args(z.cfg());
    assert_eq!(code, 1, "{out}{err}");
    let both = format!("{out}{err}");
    assert!(
        both.contains("Permission check failed (/nodes/pve2, Sys.PowerMgmt)"),
        "{both}"
    );
    // config check sees the zone needs power (shutdown = true) and names the missing privilege.
    let (code, out, _) = run(&["config", "check", "--config", z.cfg()]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("missing privilege Sys.PowerMgmt on /nodes (needed for power: "),
        "{out}"
    );

    let z = zone_at(role(&[Feature::Power]), extra, 100_000.0);
    let (code, out, err) = args(z.cfg());
    assert_eq!(code, 0, "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["shutdown"][0]["ok"], true, "{out}");
}

#[test]
fn config_check_names_privileges_beyond_what_the_features_need() {
    // A read-only zone whose token also holds the balance role's privileges.
    let z = zone(role(&[Feature::Balance]), NO_DAEMON);
    let (code, out, err) = run(&["config", "check", "--config", z.cfg()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.lines().any(|l| l
            == "zone lab: note: token holds Datastore.Audit, Sys.Console, Sys.Modify, VM.Audit, VM.Migrate on / \
                beyond what read needs (`flxp setup token` grants only what is needed)"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_vm_works_with_its_role_and_is_refused_naming_each_missing_privilege() {
    let features = set(&[Feature::Create]);
    let privs = role(&[Feature::Create]);

    let s = serve::start_with_privs(Scenario::demo(), privs.clone(), NO_DAEMON).await;
    let v = s.create("web-server").await;
    assert!(v["errors"].is_null(), "{v}\n{}", s.log());
    drop(s);

    for r in requirements(&features)
        .into_iter()
        .filter(|r| r.feature == Feature::Create)
    {
        let s = serve::start_with_privs(Scenario::demo(), without(&privs, r.privilege), NO_DAEMON)
            .await;
        let v = s.create("web-server").await;
        let message = serve::message(&v);
        assert!(
            message.contains("Permission check failed") && message.contains(r.privilege),
            "without {}: {v}",
            r.privilege
        );
    }
}

#[test]
fn without_sys_modify_an_evacuation_is_refused_before_anything_naming_the_privilege_and_the_opt_out()
 {
    let balance = role(&[Feature::Balance]);
    let z = zone(without(&balance, "Sys.Modify"), "");
    let (code, out, err) = run(&["evacuate", "pve1", "--zone", "lab", "--config", z.cfg()]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.is_empty(),
        "no plan printed, nothing carried out: {out}"
    );
    assert_contains_all(
        &err,
        &[
            "the API token may not write the lease in node pve1's notes: it needs Sys.Modify on /nodes/pve1",
            "Permission check failed (/nodes/pve1, Sys.Modify)",
            "`[lease] enabled = false`",
            "nothing was changed",
        ],
    );
}

#[test]
fn config_check_without_zones_fails_with_a_hint() {
    // The shipped config: every zone commented out. Nothing was checked, so it is not "ok".
    let shipped = include_str!("../../debian/flxp.toml");
    let (_d, cfg) = temp_file("flxp.toml", shipped);
    let (code, out, err) = run(&["config", "check", "--config", cfg.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}{err}");
    let hint = format!(
        "no zones configured: nothing to check. Add a [zones.NAME] table with hosts, token and \
         token-secret-file to {} (flxp.toml(5); `flxp setup token` creates the token)",
        cfg.display()
    );
    assert!(out.lines().any(|l| l == hint), "{out}");
    assert!(out.lines().any(|l| l == "1 problem(s) found"), "{out}");
}

/// `(path, privileges, any)` of each `perm` check in a schema `permissions.check`: all of an
/// `and`, the first way of an `or` (the one flxp takes: no pool parameter).
fn perm_checks(check: &serde_json::Value, out: &mut Vec<(String, Vec<String>, bool)>) {
    let Some(items) = check.as_array() else {
        return;
    };
    match items.first().and_then(|v| v.as_str()) {
        Some("perm") => {
            let path = items[1].as_str().unwrap().to_owned();
            let privs: Vec<String> = items[2]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p.as_str().unwrap().to_owned())
                .collect();
            let any = items.iter().skip(3).any(|v| v.as_str() == Some("any"));
            out.push((path, privs, any));
        }
        Some("and") => items[1..].iter().for_each(|c| perm_checks(c, out)),
        Some("or") => perm_checks(&items[1], out),
        _ => {}
    }
}

#[test]
fn every_schema_check_of_the_endpoints_flxp_calls_is_met_by_the_acls_setup_token_grants() {
    use flxp_pve::privileges::{REQUIREMENTS, acls, granted};
    let schema = flxp_sim::schema::ApiSchema::load().unwrap();
    let source = include_str!("../../../flxp-pve/src/endpoints.rs");
    // Every endpoint written in the file (`endpoint!(GET "/cluster/resources")`) as its key
    // (`GET /cluster/resources`), `{kind}` as both.
    let keys: BTreeSet<String> = source
        .split("endpoint!(")
        .skip(1)
        .filter_map(|s| {
            let (method, rest) = s.split_once(" \"")?;
            let (template, _) = rest.split_once('"')?;
            Some(format!("{method} {template}"))
        })
        .flat_map(|s| {
            ["qemu", "lxc"]
                .into_iter()
                .map(move |kind| s.replace("{kind}", kind))
        })
        .collect();
    assert!(keys.len() > 20, "{keys:?}");
    let everything = set(&Feature::ALL);
    let granted_all = acls(&everything);
    let mut checked = 0;
    // Wrapped by flxp-pve for library users, called by no flxp command or daemon.
    let unused = ["GET /pools", "GET /pools/{poolid}"];
    for key in keys.iter().filter(|k| !unused.contains(&k.as_str())) {
        let entry = schema
            .endpoint(key.as_str())
            .unwrap_or_else(|| panic!("{key} is not in Proxmox's API schema"));
        let mut checks = Vec::new();
        if let Some(c) = entry.get("permissions").and_then(|p| p.get("check")) {
            perm_checks(c, &mut checks);
        }
        for (template, privs, any) in checks {
            let path = template
                .replace("{node}", "pve1")
                .replace("{vmid}", "100")
                .replace("{newid}", "101")
                .replace("{storage}", "local");
            let held = granted(&granted_all, &path);
            let met = if any {
                privs.iter().any(|p| held.contains(p.as_str()))
            } else {
                privs.iter().all(|p| held.contains(p.as_str()))
            };
            assert!(
                met,
                "{key}: Proxmox checks {privs:?} on {path}; the ACLs give {held:?} there"
            );
            // Each privilege flxp needs there is one a requirement names on a path covering it.
            for p in privs.iter().filter(|p| held.contains(p.as_str())) {
                assert!(
                    REQUIREMENTS.iter().any(|r| r.privilege == p
                        && flxp_pve::privileges::is_within(&path, r.path)),
                    "{key}: {p} on {path} is granted by no requirement's path"
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 10, "only {checked} checks");
}

#[test]
fn each_feature_grants_its_privileges_only_on_their_paths() {
    use flxp_pve::privileges::{acls, granted};
    // Where flxp's calls are checked, one concrete path per subtree.
    let places = [
        "/",
        "/nodes/pve1",
        "/vms/100",
        "/storage/local",
        "/sdn/zones/localnetwork/vmbr0",
        "/access/users",
        "/pool/prod",
    ];
    for feature in Feature::ALL {
        let features = set(&[feature]);
        let given = acls(&features);
        for place in places {
            let held = granted(&given, place);
            let want: BTreeSet<&str> = requirements(&features)
                .into_iter()
                .filter(|r| flxp_pve::privileges::is_within(place, r.path))
                // `/` itself only: its ACL does not propagate.
                .filter(|r| r.path != "/" || place == "/")
                .map(|r| r.privilege)
                .collect();
            assert_eq!(held, want, "{feature:?} on {place}");
        }
        let power = granted(&given, "/nodes/pve1").contains("Sys.PowerMgmt");
        assert_eq!(power, feature == Feature::Power, "{feature:?}");
    }
}
