//! `flxp sim` (being built).

use std::process::ExitCode;

/// Arguments of `flxp sim`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `flxp sim`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("flxp sim is not available in this build yet")
}
