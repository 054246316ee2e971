//! The command line (Contract 3): one module per subcommand, each with its clap `Args` and `run`.

pub(crate) mod balance;
mod config_check;
mod consolidate;
pub mod daemon;
mod evacuate;
mod generate;
mod lease;
mod load;
mod maintenance;
mod manual;
mod place;
mod rolling;
mod serve;
mod setup;
mod sim;
mod snapshot;
mod source;
mod status;
#[cfg(test)]
mod tests;
mod usage;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Subcommand};
use flxp_core::balance::Registry;

pub use source::{RunArgs, SourceArgs};
pub use usage::UsageError;

/// `flxp --version`: the crate version and the commit it was built from (see build.rs).
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("FLXP_COMMIT"), ")");

/// Command-line arguments of `flxp`.
#[derive(Debug, clap::Parser)]
#[command(name = "flxp", version = VERSION, about = "Dynamic resource scheduling for Proxmox VE", long_about = None)]
pub struct Cli {
    /// More log output on stderr (-v debug, -vv trace); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Config file (else FLXP_CONFIG, else /etc/flxp/flxp.toml); before or after the command.
    // Global, so `flxp --config F evacuate NODE` reads as `flxp evacuate NODE --config F`: clap
    // hands the value to the subcommand's own `--config` (which keeps FLXP_CONFIG). Hidden in
    // the subcommands without one, and refused there (see `refuse_unused_globals`).
    #[arg(long, value_name = "F", global = true, hide = true)]
    config: Option<std::path::PathBuf>,
    /// The zone of the config file to act on; before or after the command.
    #[arg(long, value_name = "Z", global = true, hide = true)]
    zone: Option<String>,
    /// One JSON document on stdout; before or after the command.
    #[arg(long, global = true, hide = true)]
    json: bool,
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
    /// Take nodes through maintenance one at a time: evacuate, hook, reboot, back, guests home.
    Rolling(rolling::Args),
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
    #[command(subcommand)]
    Config(config_check::Args),
    /// Print what to run on Proxmox VE to set flxp up (a least-privilege API token).
    #[command(subcommand)]
    Setup(setup::Args),
    /// Write shell completions and man pages (used when building the package).
    #[command(hide = true)]
    Generate(generate::Args),
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

impl Command {
    /// The name the user typed.
    fn name(&self) -> &'static str {
        match self {
            Self::Place(_) => "place",
            Self::Balance(_) => "balance",
            Self::Evacuate(_) => "evacuate",
            Self::Consolidate(_) => "consolidate",
            Self::Maintenance(_) => "maintenance",
            Self::Rolling(_) => "rolling",
            Self::Status(_) => "status",
            Self::Snapshot(_) => "snapshot",
            Self::Daemon(_) => "daemon",
            Self::Serve(_) => "serve",
            Self::Sim(_) => "sim",
            Self::Config(_) => "config",
            Self::Setup(_) => "setup",
            Self::Generate(_) => "generate",
        }
    }

    /// Where the command reads the cluster from, for those that take `--from-file`.
    fn source(&self) -> Option<&SourceArgs> {
        match self {
            Self::Place(a) => Some(&a.source),
            Self::Status(a) => Some(&a.source),
            Self::Balance(a) => Some(&a.run.source),
            Self::Evacuate(a) => Some(&a.run.source),
            Self::Consolidate(a) => Some(&a.run.source),
            _ => None,
        }
    }

    /// Which of the global options `--config`, `--zone` and `--json` this command takes.
    fn takes(&self) -> [bool; 3] {
        match self {
            Self::Place(_)
            | Self::Balance(_)
            | Self::Evacuate(_)
            | Self::Consolidate(_)
            | Self::Status(_) => [true, true, true],
            Self::Maintenance(_) | Self::Rolling(_) | Self::Snapshot(_) => [true, true, false],
            Self::Daemon(_) | Self::Serve(_) | Self::Config(_) => [true, false, false],
            Self::Sim(_) | Self::Setup(_) | Self::Generate(_) => [false, false, false],
        }
    }
}

impl Cli {
    /// A global option given to a command that has no use for it: clap accepts the global
    /// everywhere, but `flxp sim --config F` must stay the mistake it was before.
    fn refuse_unused_globals(&self) -> Result<(), UsageError> {
        let given = [
            ("--config", self.config.is_some()),
            ("--zone", self.zone.is_some()),
            ("--json", self.json),
        ];
        // clap checks `--from-file`'s conflict with `--zone` before a `--zone` given ahead of
        // the command reaches it.
        if self.zone.is_some() && self.command.source().is_some_and(|s| s.from_file.is_some()) {
            return Err(UsageError(
                "--from-file and --zone both name the cluster: give one".into(),
            ));
        }
        for ((flag, given), takes) in given.into_iter().zip(self.command.takes()) {
            if given && !takes {
                return Err(UsageError(format!(
                    "`flxp {}` takes no {flag}",
                    self.command.name()
                )));
            }
        }
        Ok(())
    }
}

/// The `--zone` a command cannot do without (given before or after it).
fn required_zone<'a>(zone: Option<&'a str>, command: &str) -> Result<&'a str, UsageError> {
    zone.ok_or_else(|| {
        UsageError(format!(
            "`flxp {command}` needs --zone Z: a zone of the config file"
        ))
    })
}

/// The `--zone` a command acting on a live zone needs, and the config file (`--config`, else
/// FLXP_CONFIG, else the default path) read and checked to define that zone.
fn zone_config(
    zone: Option<&str>,
    config: Option<&std::path::Path>,
    command: &str,
) -> anyhow::Result<(String, crate::config::Config)> {
    let zone = required_zone(zone, command)?.to_owned();
    let source = SourceArgs {
        from_file: None,
        zone: Some(zone.clone()),
        config: config.map(std::path::Path::to_path_buf),
    };
    let config = load::config(&source)?;
    config.zone(&zone).map_err(UsageError::from)?;
    Ok((zone, config))
}

/// Runs the chosen subcommand and returns the exit code.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    cli.refuse_unused_globals()?;
    match cli.command {
        Command::Place(a) => place::run(a),
        Command::Status(a) => status::run(a),
        Command::Maintenance(a) => maintenance::run(a),
        Command::Rolling(a) => rolling::run(a),
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
