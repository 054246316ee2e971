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
