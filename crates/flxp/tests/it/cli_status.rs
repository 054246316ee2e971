//! `flxp status` as a user runs it.

use super::{example, on_example, run, temp_file};

#[test]
fn table_shows_load_guests_and_spread() {
    let (_d, f) = temp_file(
        "s.json",
        r#"{"resources":[
            {"id":"node/a","type":"node","node":"a","status":"online","maxmem":17179869184,"mem":8589934592,"maxcpu":8,"cpu":0.25},
            {"id":"node/b","type":"node","node":"b","status":"online","maxmem":17179869184,"mem":4294967296,"maxcpu":8,"cpu":0.5},
            {"id":"qemu/101","type":"qemu","vmid":101,"node":"a","status":"running","maxmem":2147483648,"mem":1073741824,"maxcpu":2,"cpu":0.5,"tags":"flxp.node.b","name":"web"},
            {"id":"qemu/102","type":"qemu","vmid":102,"node":"b","status":"stopped","maxmem":2147483648}],
           "nodes":{"b":{"notes":"flxp.label.ssd flxp.taint.gpu"}}}"#,
    );
    let (code, out, _) = run(&["status", "--from-file", f.to_str().unwrap()]);
    assert_eq!(code, 0);
    let want =
        " NODE  STATUS              MEMORY  MEM%    CPU  CPU%  GUESTS  LABELS  TAINTS  VIOLATIONS 
 a     online  8.0 GiB / 16.0 GiB  50.0  2 / 8  25.0   1 / 1                           1 
 b     online  4.0 GiB / 16.0 GiB  25.0  4 / 8  50.0   0 / 1  ssd     gpu              0 

2 nodes, 2 guests (1 running); memory spread 25.0 pp, CPU spread 25.0 pp

1 rule violations:
  flxp.node: guest 101 (web) runs on a, but flxp.node allows only {b}
";
    assert_eq!(out, want);
}

#[test]
fn a_node_without_capacity_shows_its_load_as_unknown_not_empty() {
    let (_d, f) = temp_file(
        "s.json",
        r#"[{"id":"node/a","type":"node","node":"a","status":"online","maxmem":17179869184,"mem":8589934592,"maxcpu":8,"cpu":0.25},
            {"id":"node/c","type":"node","node":"c","status":"online","mem":1073741824}]"#,
    );
    let (code, out, err) = run(&["status", "--from-file", f.to_str().unwrap()]);
    assert_eq!(code, 0);
    let want =
        " NODE  STATUS              MEMORY  MEM%    CPU  CPU%  GUESTS  LABELS  TAINTS  VIOLATIONS 
 a     online  8.0 GiB / 16.0 GiB  50.0  2 / 8  25.0   0 / 0                           0 
 c     online       1.0 GiB / 0 B     -  0 / 0     -   0 / 0                           0 
";
    assert!(out.starts_with(want), "{out}");
    assert!(
        err.contains("node c: online but reports no maxmem: no guest can be placed on it"),
        "{err}"
    );
}

#[test]
fn json_reports_violations_conflicts_and_warnings() {
    let (code, out, _) = on_example("status", "rules-hetero.json", &["--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["nodes"].as_array().unwrap().len(), 6);
    assert_eq!(v["memory_spread"], 43.0);
    let rules: Vec<&str> = v["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["rule"].as_str().unwrap())
        .collect();
    assert_eq!(
        rules,
        ["flxp.anti-affinity.web", "flxp.node", "ha:api-apart"]
    );
    assert_eq!(v["conflicts"].as_array().unwrap().len(), 1);
    assert!(v["warnings"].to_string().contains("flxp.labl.typo"));
}

#[test]
fn bare_pvesh_dump_and_data_envelope_read_the_same() {
    let f = example("pvesh-4node.json");
    let text = std::fs::read_to_string(&f).unwrap();
    let (_d, wrapped) = temp_file("w.json", &format!("{{\"data\": {text}}}"));
    let a = run(&["status", "--from-file", f.to_str().unwrap(), "--json"]).1;
    let b = run(&["status", "--from-file", wrapped.to_str().unwrap(), "--json"]).1;
    assert_eq!(a, b);
}

#[test]
fn an_empty_flxp_config_is_named_not_blamed_on_a_flag() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_flxp"))
        .args(["status", "--zone", "lab"])
        .env("FLXP_CONFIG", "")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("FLXP_CONFIG is set but empty"), "{err}");
}

/// Three nodes in maintenance: c still runs an ignored guest, d holds a stopped one, e nothing.
const MAINTENANCE: &str = r#"{"resources":[
    {"id":"node/a","type":"node","node":"a","status":"online","maxmem":17179869184,"mem":4294967296,"maxcpu":8,"cpu":0.25},
    {"id":"node/c","type":"node","node":"c","status":"online","maxmem":17179869184,"mem":4294967296,"maxcpu":8,"cpu":0.25},
    {"id":"node/d","type":"node","node":"d","status":"online","maxmem":17179869184,"mem":4294967296,"maxcpu":8,"cpu":0.25},
    {"id":"node/e","type":"node","node":"e","status":"online","maxmem":17179869184,"mem":4294967296,"maxcpu":8,"cpu":0.25},
    {"id":"qemu/151","type":"qemu","vmid":151,"node":"c","status":"running","maxmem":2147483648,"mem":1073741824,"maxcpu":2,"cpu":0.1,"tags":"flxp.ignore","name":"monitoring"},
    {"id":"qemu/152","type":"qemu","vmid":152,"node":"d","status":"stopped","maxmem":2147483648,"name":"old"}],
   "nodes":{"c":{"notes":"flxp.maintenance"},"d":{"notes":"flxp.maintenance"},"e":{"notes":"flxp.maintenance"}}}"#;

#[test]
fn a_node_in_maintenance_says_whether_it_is_safe_to_reboot_and_who_still_runs_there() {
    let (_d, f) = temp_file("s.json", MAINTENANCE);
    let (code, out, _) = run(&["status", "--from-file", f.to_str().unwrap()]);
    assert_eq!(code, 0);
    let want = "
in maintenance:
  c: 1 running guest still here, not safe to reboot
    151 monitoring: tagged flxp.ignore / plb_ignore: never moved
  d: stopped guests only (1), safe to reboot
  e: empty, safe to reboot
";
    let tail = out.split_once("CPU spread").map(|(_, t)| t).unwrap_or("");
    assert_eq!(tail.split_once('\n').map(|(_, t)| t), Some(want), "{out}");
}

#[test]
fn json_gives_each_node_in_maintenance_its_state_and_the_guests_still_running() {
    let (_d, f) = temp_file("s.json", MAINTENANCE);
    let (code, out, _) = run(&["status", "--from-file", f.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let states: Vec<&serde_json::Value> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| &n["maintenance_state"])
        .collect();
    assert_eq!(
        states,
        [
            &serde_json::Value::Null,
            &serde_json::json!({"state": "running", "guests": [{"vmid": 151, "name": "monitoring",
                "node": "c", "reason": "tagged flxp.ignore / plb_ignore: never moved"}]}),
            &serde_json::json!({"state": "stopped-only", "stopped": 1}),
            &serde_json::json!({"state": "empty"}),
        ]
    );
}
