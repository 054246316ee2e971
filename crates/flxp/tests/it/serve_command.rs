//! The `flxp serve` command line the end-to-end tests and the API benchmark both start (the
//! benchmark includes this file by path).

use std::path::Path;
use std::process::Command;

/// `flxp serve` on `config`, listening on a free loopback port; `FLXP_CONFIG` is removed so the
/// caller's environment cannot point it elsewhere.
pub fn serve_command(config: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_flxp"));
    cmd.args([
        "serve",
        "--config",
        config.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
    ])
    .env_remove("FLXP_CONFIG");
    cmd
}
