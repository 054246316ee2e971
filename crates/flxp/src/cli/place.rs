//! `flxp place` (being built).

use std::process::ExitCode;

/// Arguments of `flxp place`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    source: super::SourceArgs,
}

/// Runs `flxp place`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("flxp place is not available in this build yet")
}
