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
    // Needed all the same, but not `required` to clap's parser: it checks before it hands the
    // subcommand a `--zone` given ahead of it (`flxp --zone Z ...`); `run` refuses a missing one.
    #[arg(long, value_name = "Z")]
    pub zone: Option<String>,
    /// Config file (else FLXP_CONFIG, else /etc/flxp/flxp.toml).
    #[arg(long, value_name = "F", env = "FLXP_CONFIG")]
    pub config: Option<PathBuf>,
}

/// Runs `flxp snapshot`: one snapshot of the zone, printed as pretty JSON.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let zone = super::required_zone(args.zone.as_deref(), "snapshot")?.to_owned();
    let config = Config::load(&Config::path(args.config.as_deref()))?;
    let snapshot = load::live_snapshot(&config, &zone)?;
    crate::output::say(snapshot.to_json_pretty());
    Ok(ExitCode::SUCCESS)
}
