//! Commands against a live zone: the simulator in-process over HTTPS, pinned by fingerprint.

use std::path::PathBuf;

use flxp_sim::{Scenario, Sim, SimHandle, TlsIdentity};

use super::{run, temp_file};

const TOKEN: &str = "root@pam!flxp=5f0c3a8e-1d2b-4c6f-9a7e-3b2d1c0f9e8d";

/// A running simulator on a free loopback port with a config file pointing at it.
struct Zone {
    _runtime: tokio::runtime::Runtime,
    _handle: SimHandle,
    _dir: tempfile::TempDir,
    config: PathBuf,
}

fn zone() -> Zone {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (handle, fingerprint) = runtime.block_on(async {
        let mut scenario = Scenario::demo();
        scenario.add_token(TOKEN).unwrap();
        let sim = Sim::new(scenario).unwrap();
        let tls = TlsIdentity::generate(&["127.0.0.1".to_owned(), "localhost".to_owned()]).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let handle = SimHandle::spawn(listener, sim, Some(&tls)).unwrap();
        let fp = handle.fingerprint().unwrap().to_owned();
        (handle, fp)
    });
    let (id, secret) = TOKEN.rsplit_once('=').unwrap();
    let text = format!(
        "[zones.lab]\nhosts = [\"{}\"]\ntoken = \"{id}\"\ntoken-secret = \"{secret}\"\nfingerprint = \"{fingerprint}\"\n",
        handle.addr()
    );
    let (dir, config) = temp_file("flxp.toml", &text);
    Zone {
        _runtime: runtime,
        _handle: handle,
        _dir: dir,
        config,
    }
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
    let (code, from_file, _) = run(&["status", "--from-file", snap.to_str().unwrap(), "--json"]);
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
