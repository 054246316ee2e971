//! `flxp snapshot --zone Z [--config F]`: writes the zone's cluster snapshot (Contract 1) to
//! stdout as pretty JSON, so any decision can be replayed later with `--from-file`.

use std::path::PathBuf;
use std::process::ExitCode;

use super::load;
use crate::config::Config;

/// Arguments of `flxp snapshot`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Zone (a Proxmox cluster) of the config file to read.
    // Needed all the same: not `required` to clap's parser, which checks before it hands the
    // subcommand a `--zone` given before it (`flxp --zone Z ...`); the field's conversion
    // refuses a missing one after.
    #[arg(long, value_name = "Z", required = false)]
    pub zone: String,
    /// Config file (else FLXP_CONFIG, else /etc/flxp/flxp.toml).
    #[arg(long, value_name = "F", env = "FLXP_CONFIG")]
    pub config: Option<PathBuf>,
}

/// Runs `flxp snapshot`: one snapshot of the zone, printed as pretty JSON.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let config = Config::load(&Config::path(args.config.as_deref()))?;
    let snapshot = load::live_snapshot(&config, &args.zone)?;
    crate::output::say(snapshot.to_json_pretty());
    Ok(ExitCode::SUCCESS)
}
