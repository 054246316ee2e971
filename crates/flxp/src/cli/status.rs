//! `flxp status` (being built).

use std::process::ExitCode;

/// Arguments of `flxp status`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    source: super::SourceArgs,
}

/// Runs `flxp status`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("flxp status is not available in this build yet")
}
