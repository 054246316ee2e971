//! `flxp snapshot` (being built).

use std::process::ExitCode;

/// Arguments of `flxp snapshot`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `flxp snapshot`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("flxp snapshot is not available in this build yet")
}
