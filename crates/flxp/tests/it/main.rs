//! End-to-end tests of the flxp binary: run it as a user would and compare what it prints.
#![allow(clippy::unwrap_used)] // tests panic on unexpected errors by design

mod cli_balance;
mod cli_consolidate;
mod cli_daemon;
mod cli_evacuate;
mod cli_place;
mod cli_replicas;
mod cli_setup;
mod cli_sim;
mod cli_status;
mod dashboard;
mod docs;
mod docs_check;
mod live_zone;
mod local_disks;
mod plugins;
mod privileges;
mod serve;
mod serve_concurrency;
mod serve_errors;
mod webdriver;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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
    let f = example(file);
    let mut all = vec![cmd, "--from-file", f.to_str().unwrap()];
    all.extend_from_slice(args);
    run(&all)
}

/// Parses `out` as JSON; a failure shows what was printed.
pub fn json(out: &str) -> serde_json::Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// Writes a file into a fresh temp dir and returns both (the dir must outlive the test's use).
pub fn temp_file(name: &str, content: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, content).unwrap();
    (dir, path)
}
