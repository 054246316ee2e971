//! `flxp serve`: the GraphQL API, metrics and the daemon loop; without a config file, on a
//! built-in simulated zone.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

/// Arguments of `flxp serve`.
// The doc comments are the `--help` texts: `[balance]`/`[api]` there name config-file sections, not
// items to link to.
#[allow(rustdoc::broken_intra_doc_links)]
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Config file (else FLXP_CONFIG, else /etc/flxp/flxp.toml). With none of them, flxp serves a
    /// built-in simulated zone named `sim`.
    #[arg(long, value_name = "F", env = "FLXP_CONFIG")]
    pub config: Option<PathBuf>,
    /// Address to listen on (else [api].listen, else 127.0.0.1:8080); port 0 picks a free one.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
}

/// Runs `flxp serve` until SIGINT/SIGTERM.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(crate::serve::run(args.config, args.listen))?;
    Ok(ExitCode::SUCCESS)
}
