//! Where a command reads the cluster from: a snapshot file, or a zone of the config file.

use std::path::PathBuf;

use clap::Args;

/// `--from-file F | --zone Z` plus `--config F`.
#[derive(Debug, Clone, Args)]
pub struct SourceArgs {
    /// Read the cluster from a snapshot file (Contract 1, a `pvesh get /cluster/resources` dump, or
    /// `{"data": [...]}`); `-` reads stdin. Only plans, never changes anything.
    #[arg(long, value_name = "F", conflicts_with = "zone")]
    pub from_file: Option<PathBuf>,
    /// Read the cluster live from this zone of the config file.
    #[arg(long, value_name = "Z")]
    pub zone: Option<String>,
    /// Config file (else FLXP_CONFIG, else /etc/flxp/flxp.toml).
    #[arg(long, value_name = "F", env = "FLXP_CONFIG")]
    pub config: Option<PathBuf>,
}

/// What every command that plans and carries out takes: the cluster, whether only to plan, and
/// JSON output.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// Only plan: print what would be done, change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print one JSON document on stdout: the plan, and what carrying it out did.
    #[arg(long)]
    pub json: bool,
    /// When another flxp acts on the zone (holds its lease), wait up to SECS seconds for it
    /// instead of refusing at once.
    #[arg(long, value_name = "SECS")]
    pub wait: Option<u64>,
}

impl RunArgs {
    /// How this run takes the zone's lease, as the flxp `command`.
    pub(crate) fn acting<'a>(&self, command: &'a str) -> super::lease::Acting<'a> {
        super::lease::Acting {
            command,
            dry_run: self.dry_run,
            wait: self.wait.map(std::time::Duration::from_secs),
            nodes: &[],
        }
    }
}
