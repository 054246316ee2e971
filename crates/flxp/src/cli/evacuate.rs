//! `flxp evacuate` (being built).

use std::process::ExitCode;

/// Arguments of `flxp evacuate`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `flxp evacuate`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("flxp evacuate is not available in this build yet")
}
