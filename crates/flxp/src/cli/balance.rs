//! `flxp balance` (being built).

use std::process::ExitCode;

/// Arguments of `flxp balance`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `flxp balance`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("flxp balance is not available in this build yet")
}
