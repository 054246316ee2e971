//! `flxp rolling [NODE]... --zone Z`: rolling maintenance, one node at a time (every node when
//! none is named): evacuate, the hook, a reboot, back online and quorate, maintenance cleared,
//! guests back home. Progress is kept in Proxmox (see `flxp_engine::rolling`): a rerun continues
//! where the last run stopped. `--dry-run` prints the schedule and changes nothing.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use flxp_core::units::{fmt_bytes, fmt_secs};
use flxp_engine::rolling::{Hook, RollingError, RollingOptions, Step};
use flxp_engine::{Executor, Goal};

use super::{UNSATISFIABLE, UsageError, load};
use crate::output::{say, tell};

/// Arguments of `flxp rolling`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The nodes, in order (none: every node of the zone, by name).
    #[arg(value_name = "NODE")]
    nodes: Vec<String>,
    /// The zone of the config file.
    // Needed all the same, but not `required` to clap's parser: it checks before it hands the
    // subcommand a `--zone` given ahead of it (`flxp --zone Z ...`); `run` refuses a missing one.
    #[arg(long, value_name = "Z")]
    zone: Option<String>,
    /// Config file (else FLXP_CONFIG, else /etc/flxp/flxp.toml).
    #[arg(long, value_name = "F", env = "FLXP_CONFIG")]
    config: Option<std::path::PathBuf>,
    /// A command run once a node is empty, with the node's name as its last argument (and in
    /// FLXP_NODE): exit 0 done, 10 nothing to do (no reboot), any other code fails the run.
    #[arg(long, value_name = "CMD")]
    hook: Option<String>,
    /// Do not reboot the nodes through the API.
    #[arg(long)]
    no_reboot: bool,
    /// Longest wait for a rebooted node to be online and the cluster quorate.
    #[arg(long, value_name = "SECS", default_value_t = 900)]
    boot_timeout: u64,
    /// Leave the evacuated guests where they are instead of taking them back home.
    #[arg(long)]
    stay: bool,
    /// Reboot a node even when running guests stay on it (flxp.ignore, locked): the reboot stops
    /// them. Without it such a node stops the run before its reboot.
    #[arg(long)]
    stop_left: bool,
    /// Print the schedule only.
    #[arg(long)]
    dry_run: bool,
    /// When another flxp acts on the zone (holds its lease), wait up to SECS seconds for it.
    #[arg(long, value_name = "SECS")]
    wait: Option<u64>,
}

/// Runs `flxp rolling`: exit 0 all done, 1 a step failed, 3 a node could not go out safely.
pub fn run(args: Args) -> Result<ExitCode> {
    let zone = super::required_zone(args.zone.as_deref(), "rolling")?.to_owned();
    let source = super::SourceArgs {
        from_file: None,
        zone: Some(zone.clone()),
        config: args.config.clone(),
    };
    let config = load::config(&source)?;
    config.zone(&zone).map_err(UsageError::from)?;
    let hook = match &args.hook {
        Some(text) => {
            let words: Vec<String> = text.split_whitespace().map(str::to_owned).collect();
            if words.is_empty() {
                return Err(UsageError("--hook: the command is empty".into()).into());
            }
            Some(Hook { command: words })
        }
        None => None,
    };
    let options = RollingOptions {
        evacuate: config.evacuate.clone(),
        hook,
        reboot: !args.no_reboot,
        boot_timeout: Duration::from_secs(args.boot_timeout),
        poll: Duration::from_secs_f64(config.migration.poll_secs),
        return_home: !args.stay && config.evacuate.return_home,
        stop_left: args.stop_left,
    };
    let placer = Arc::new(load::placer(&config)?.in_zone(Some(zone.clone())));
    let acting = super::lease::Acting {
        command: "rolling",
        dry_run: args.dry_run,
        wait: args.wait.map(Duration::from_secs),
    };
    // Migrations are assumed to copy at the executor's expected bandwidth.
    let bandwidth = crate::app::daemon::execute_options(&config).expected_bandwidth;
    let work = async |executor: Executor, _: Option<&super::lease::Held>, _: Option<&_>| {
        if args.dry_run {
            return schedule(&executor, &args.nodes, &options, bandwidth).await;
        }
        let told = |n: flxp_engine::rolling::News| tell(n.line);
        match executor.rolling(&args.nodes, &options, &told).await {
            Ok(r) => {
                say(format!(
                    "rolling maintenance done: {} node(s) done by this run{}, {} migration(s)",
                    r.done.len(),
                    if r.skipped.is_empty() {
                        String::new()
                    } else {
                        format!(" ({} by an earlier one)", r.skipped.len())
                    },
                    r.migrations
                ));
                Ok(ExitCode::SUCCESS)
            }
            Err(e @ RollingError::UnknownNode { .. }) => Err(UsageError(e.to_string()).into()),
            Err(e @ RollingError::Unsafe { .. }) => {
                say(format!(
                    "stopped (exit code 3): {e}; nothing was changed on it"
                ));
                Ok(ExitCode::from(UNSATISFIABLE))
            }
            Err(e) => {
                say(format!(
                    "stopped (exit code 1): {e}; fix the cause and run the same command again to \
                     continue from there"
                ));
                Ok(ExitCode::from(1))
            }
        }
    };
    super::lease::run_in_zone(&config, &zone, placer, acting, work)
}

/// Prints the schedule: per node, what leaves it, the bytes, an estimate of the time at
/// `bandwidth` bytes per second, and the steps after.
async fn schedule(
    executor: &Executor,
    nodes: &[String],
    options: &RollingOptions,
    bandwidth: f64,
) -> Result<ExitCode> {
    let model = executor.read().await.context("cannot read the zone")?;
    let progress = executor.rolling_progress().await?;
    let mut names: Vec<String> = if nodes.is_empty() {
        model
            .cluster
            .nodes()
            .iter()
            .map(|n| n.name.clone())
            .collect()
    } else {
        nodes.to_vec()
    };
    if nodes.is_empty() {
        names.sort();
    }
    let mut unmet = false;
    let (mut total_bytes, mut total_moves) = (0u64, 0usize);
    for node in &names {
        if progress.get(node).is_some_and(|p| p.step == Step::Done) {
            say(format!("{node}: done by an earlier run, skipped"));
            continue;
        }
        let goal = Goal::Evacuate {
            nodes: vec![node.clone()],
            options: options.evacuate.clone(),
        };
        let plan = match executor.plan(&goal).await {
            Err(e @ flxp_engine::Error::UnknownNode { .. }) => {
                return Err(UsageError(e.to_string()).into());
            }
            other => other.with_context(|| format!("cannot plan the evacuation of {node}"))?,
        };
        let secs = (plan.bytes as f64 / bandwidth.max(1.0)).ceil() as i64;
        total_bytes += plan.bytes;
        total_moves += plan.migrations.len();
        let mut steps = vec![format!(
            "{node}: evacuate {} migration(s), {} to copy, about {}",
            plan.migrations.len(),
            fmt_bytes(plan.bytes),
            fmt_secs(secs)
        )];
        if let Some(h) = &options.hook {
            steps.push(format!("hook {} {node}", h.command.join(" ")));
        }
        if options.reboot {
            steps.push(format!(
                "reboot, wait up to {} for it",
                fmt_secs(options.boot_timeout.as_secs() as i64)
            ));
        }
        steps.push("clear maintenance".into());
        if options.return_home {
            steps.push(format!("{} guest(s) back home", plan.migrations.len()));
        }
        say(steps.join(" → "));
        for m in &plan.migrations {
            say(format!(
                "    {} {} → {} ({})",
                m.vmid,
                m.name,
                m.to,
                fmt_bytes(m.bytes)
            ));
        }
        for u in &plan.unplaced {
            unmet = true;
            say(format!(
                "    {} {} fits on no other node: {}",
                u.vmid, u.name, u.reason
            ));
        }
    }
    say(format!(
        "total: {total_moves} migration(s) out, {} to copy, about {} of migrations (as many back home)",
        fmt_bytes(total_bytes),
        fmt_secs((total_bytes as f64 / bandwidth.max(1.0)).ceil() as i64)
    ));
    Ok(if unmet {
        ExitCode::from(UNSATISFIABLE)
    } else {
        ExitCode::SUCCESS
    })
}
