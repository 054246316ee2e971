//! The command line (Contract 3): one module per subcommand, each with its clap `Args` and `run`.

pub(crate) mod balance;
mod config_check;
mod consolidate;
pub mod daemon;
mod evacuate;
mod generate;
mod lease;
pub(crate) mod left;
mod load;
mod maintenance;
mod manual;
mod place;
mod serve;
mod setup;
mod sim;
mod snapshot;
mod source;
mod status;
#[cfg(test)]
mod tests;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Subcommand};
use flxp_core::balance::Registry;

pub use source::{RunArgs, SourceArgs};

/// `flxp --version`: the crate version and the commit it was built from (see build.rs).
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("FLXP_COMMIT"), ")");

/// Command-line arguments of `flxp`.
#[derive(Debug, clap::Parser)]
#[command(name = "flxp", version = VERSION, about = "Dynamic resource scheduling for Proxmox VE", long_about = None)]
pub struct Cli {
    /// More log output on stderr (-v debug, -vv trace); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Choose the best node for a new VM, and explain why.
    Place(place::Args),
    /// Plan (and carry out) live migrations that restore balance without breaking any rule.
    Balance(balance::Args),
    /// Empty a node for maintenance, rules honoured.
    Evacuate(evacuate::Args),
    /// Pack guests onto fewer nodes (limits, rules and headroom kept) and free the others.
    Consolidate(consolidate::Args),
    /// Set or clear a node's maintenance mark (`flxp.maintenance` in its notes).
    Maintenance(maintenance::Args),
    /// Show each node's load, guests and rule violations.
    Status(status::Args),
    /// Write the cluster snapshot (Contract 1) of a zone to stdout.
    Snapshot(snapshot::Args),
    /// Rebalance and evacuate every configured zone at an interval.
    Daemon(daemon::Args),
    /// Serve the GraphQL API (with GraphiQL), metrics and health probes, with the daemon loop.
    Serve(serve::Args),
    /// Run a simulated Proxmox VE API from a scenario file.
    Sim(sim::Args),
    /// Check the config file and each zone (reachability, certificate, token privileges).
    Config(config_check::Args),
    /// Print what to run on Proxmox VE to set flxp up (a least-privilege API token).
    Setup(setup::Args),
    /// Write shell completions and man pages (used when building the package).
    #[command(hide = true)]
    Generate(generate::Args),
}

/// An error in what the user typed, found after parsing (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

impl From<crate::config::UnknownZone> for UsageError {
    fn from(e: crate::config::UnknownZone) -> Self {
        Self(e.to_string())
    }
}

/// Exit code 3: nothing can satisfy the request (no node fits, no safe plan).
pub const UNSATISFIABLE: u8 = 3;

impl Cli {
    /// The command line with `balance --method` parsed against `registry` and its help listing
    /// that registry's methods; the binary's is [`Registry::builtin`].
    pub fn command_with(registry: &'static Registry) -> clap::Command {
        Self::command().mut_subcommand("balance", |c| balance::with_methods(c, registry))
    }

    /// Parses `args` (the program name first) with [`Cli::command_with`] this registry.
    pub fn try_parse_with<I, T>(registry: &'static Registry, args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let mut cmd = Self::command_with(registry);
        let mut matches = cmd.try_get_matches_from_mut(args)?;
        Self::from_arg_matches_mut(&mut matches).map_err(|e| e.format(&mut cmd))
    }

    /// Whether the command was asked for `--json` output.
    pub fn wants_json(&self) -> bool {
        match &self.command {
            Command::Place(a) => a.json,
            Command::Status(a) => a.json,
            Command::Balance(a) => a.run.json,
            Command::Evacuate(a) => a.run.json,
            Command::Consolidate(a) => a.run.json,
            _ => false,
        }
    }
}

/// Runs the chosen subcommand and returns the exit code.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Place(a) => place::run(a),
        Command::Status(a) => status::run(a),
        Command::Maintenance(a) => maintenance::run(a),
        Command::Balance(a) => balance::run(a),
        Command::Evacuate(a) => evacuate::run(a),
        Command::Consolidate(a) => consolidate::run(a),
        Command::Snapshot(a) => snapshot::run(a),
        Command::Daemon(a) => daemon::run(a),
        Command::Serve(a) => serve::run(a),
        Command::Sim(a) => sim::run(a),
        Command::Config(a) => config_check::run(a),
        Command::Setup(a) => setup::run(a),
        Command::Generate(a) => generate::run(a),
    }
}
