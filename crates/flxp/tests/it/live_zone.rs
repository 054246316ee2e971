//! Commands against a live zone: the simulator in-process over HTTPS, pinned by fingerprint.

use flxp_sim::Scenario;

use super::{TlsZone, on_file, run, temp_file, tls_zone};

const TOKEN: &str = "root@pam!flxp=5f0c3a8e-1d2b-4c6f-9a7e-3b2d1c0f9e8d";

/// The demo scenario served over HTTPS, pinned by fingerprint.
fn zone() -> TlsZone {
    let mut scenario = Scenario::demo();
    scenario.add_token(TOKEN).unwrap();
    tls_zone(scenario, TOKEN, "")
}

#[test]
fn status_place_and_snapshot_read_a_live_zone() {
    let z = zone();
    let cfg = z.config.to_str().unwrap();
    let (code, out, err) = run(&["status", "--zone", "lab", "--config", cfg, "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["nodes"].as_array().unwrap().len(), 4, "{out}");

    let (code, out, err) = run(&[
        "place", "--zone", "lab", "--config", cfg, "--memory", "2G", "--cores", "1", "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v["node"].is_string(), "{out}");

    let (code, out, err) = run(&["snapshot", "--zone", "lab", "--config", cfg]);
    assert_eq!(code, 0, "{err}");
    let (_d, snap) = temp_file("snap.json", &out);
    let (code, from_file, _) = on_file("status", &snap, &["--json"]);
    assert_eq!(code, 0);
    let a: serde_json::Value = serde_json::from_str(&from_file).unwrap();
    assert_eq!(a["nodes"].as_array().unwrap().len(), 4);
}

#[test]
fn a_wrong_fingerprint_or_unknown_zone_is_a_clear_error() {
    let z = zone();
    let text = std::fs::read_to_string(&z.config).unwrap();
    let bad = text.lines().map(|l| if l.starts_with("fingerprint") { "fingerprint = \"00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF\"" } else { l }).collect::<Vec<_>>().join("\n");
    let (_d, cfg) = temp_file("bad.toml", &bad);
    let (code, _, err) = run(&["status", "--zone", "lab", "--config", cfg.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.to_lowercase().contains("fingerprint") || err.contains("certificate"),
        "{err}"
    );
    assert!(!err.contains("5f0c3a8e"), "the secret must not leak: {err}");
    let (code, _, err) = run(&[
        "status",
        "--zone",
        "nope",
        "--config",
        z.config.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("lab"), "{err}");
}
