//! End-to-end tests of the flxp binary: run it as a user would and compare what it prints.
#![allow(clippy::unwrap_used)] // tests panic on unexpected errors by design

mod audit;
mod cli_balance;
mod cli_consolidate;
mod cli_daemon;
mod cli_evacuate;
mod cli_in_flight;
mod cli_lease;
mod cli_maintenance;
mod cli_place;
mod cli_replicas;
mod cli_rolling;
mod cli_rolling_waves;
mod cli_setup;
mod cli_sim;
mod cli_status;
mod dashboard;
mod dashboard_live;
mod dashboard_rolling;
mod docs;
mod docs_check;
mod graphql_schema;
mod live_zone;
mod local_disks;
mod plugins;
mod privileges;
mod serve;
mod serve_command;
mod serve_concurrency;
mod serve_errors;
mod serve_events;
mod serve_lease;
mod serve_maintenance;
mod serve_safety;
mod webdriver;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};

use flxp_sim::{Scenario, Sim, SimHandle, TlsIdentity};

/// The repository's `examples/` directory.
pub fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
}

/// Runs the built `flxp` with arguments and no config file in reach.
pub fn flxp(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flxp"))
        .args(args)
        .env_remove("FLXP_CONFIG")
        .env("RUST_LOG", "warn")
        .output()
        .unwrap()
}

/// Exit code, stdout and stderr as text.
pub fn run(args: &[&str]) -> (i32, String, String) {
    let o = flxp(args);
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8(o.stdout).unwrap(),
        String::from_utf8(o.stderr).unwrap(),
    )
}

/// Runs `flxp CMD --from-file examples/FILE ARGS...`.
pub fn on_example(cmd: &str, file: &str, args: &[&str]) -> (i32, String, String) {
    on_file(cmd, example(file), args)
}

/// Runs `flxp CMD --from-file FILE ARGS...` on a snapshot file anywhere.
pub fn on_file(cmd: &str, file: impl AsRef<Path>, args: &[&str]) -> (i32, String, String) {
    let mut all = vec![cmd, "--from-file", file.as_ref().to_str().unwrap()];
    all.extend_from_slice(args);
    run(&all)
}

/// Parses `out` as JSON; a failure shows what was printed.
pub fn json(out: &str) -> serde_json::Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// Checks that `text` contains each of `wants`, showing `text` when one is missing.
pub fn assert_contains_all(text: &str, wants: &[&str]) {
    for want in wants {
        assert!(text.contains(want), "{want:?} missing in:\n{text}");
    }
}

/// The string `key` of every item of a JSON list, in order.
pub fn strs<'a>(list: &'a serde_json::Value, key: &str) -> Vec<&'a str> {
    let items = list
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"));
    items.iter().map(|x| x[key].as_str().unwrap()).collect()
}

/// Writes a file into a fresh temp dir and returns both (the dir must outlive the test's use).
pub fn temp_file(name: &str, content: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, content).unwrap();
    (dir, path)
}

/// A simulator serving HTTPS on a free loopback port, and a config file pinning its certificate.
pub struct TlsZone {
    _runtime: tokio::runtime::Runtime,
    _handle: SimHandle,
    _dir: tempfile::TempDir,
    pub config: PathBuf,
}

impl TlsZone {
    /// The config file's path as an argument.
    pub fn cfg(&self) -> &str {
        self.config.to_str().unwrap()
    }
}

/// Serves `scenario` (which already holds `token`) over HTTPS; the config file names it as zone
/// `lab` with `token`, the certificate's fingerprint and `extra`.
pub fn tls_zone(scenario: Scenario, token: &str, extra: &str) -> TlsZone {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (handle, fingerprint) = runtime.block_on(async {
        let sim = Sim::new(scenario).unwrap();
        let tls = TlsIdentity::generate(&["127.0.0.1".to_owned(), "localhost".to_owned()]).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let handle = SimHandle::spawn(listener, sim, Some(&tls)).unwrap();
        let fp = handle.fingerprint().unwrap().to_owned();
        (handle, fp)
    });
    let text = lab_config(
        &handle.addr().to_string(),
        token,
        &format!("fingerprint = \"{fingerprint}\"\n{extra}"),
    );
    let (dir, config) = temp_file("flxp.toml", &text);
    TlsZone {
        _runtime: runtime,
        _handle: handle,
        _dir: dir,
        config,
    }
}

/// The config text of zone `lab` on `host` with API token `token` (`id=secret`), then `rest`.
pub fn lab_config(host: &str, token: &str, rest: &str) -> String {
    let (id, secret) = token.rsplit_once('=').unwrap();
    format!(
        "[zones.lab]\nhosts = [\"{host}\"]\ntoken = \"{id}\"\ntoken-secret = \"{secret}\"\n{rest}"
    )
}

/// Sends SIGTERM to a child this test started, by its pid.
pub fn sigterm(child: &Child) {
    let sent = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}
