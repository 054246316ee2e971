//! `flxp rolling [NODE]... --zone Z`: rolling maintenance, one node at a time (every node when
//! none is named): evacuate, the hook, a reboot, back online and quorate, maintenance cleared,
//! guests back home. Progress is kept in Proxmox (see `flxp_engine::rolling`): a rerun continues
//! where the last run stopped. `--dry-run` prints the schedule and changes nothing.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use flxp_core::units::{fmt_bytes, fmt_secs};
use flxp_engine::Executor;
use flxp_engine::rolling::{Hook, Planned, RollingError, RollingOptions};

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
    /// Else `[rolling] hook` of the config.
    #[arg(long, value_name = "CMD")]
    hook: Option<String>,
    /// Do not reboot the nodes through the API.
    #[arg(long)]
    no_reboot: bool,
    /// Longest wait for a rebooted node to be online and the cluster quorate (else
    /// `[rolling] boot-timeout-secs`, 900).
    #[arg(long, value_name = "SECS")]
    boot_timeout: Option<u64>,
    /// Most nodes out at a time, while quorum, room, N+1 headroom and the rules allow (else
    /// `[rolling] parallel`, 1).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    parallel: Option<u16>,
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
    let (zone, config) =
        super::zone_config(args.zone.as_deref(), args.config.as_deref(), "rolling")?;
    let hook = match &args.hook {
        Some(text) => {
            let words: Vec<String> = text.split_whitespace().map(str::to_owned).collect();
            if words.is_empty() {
                return Err(UsageError("--hook: the command is empty".into()).into());
            }
            Some(Hook { command: words })
        }
        None => config.rolling.hook(),
    };
    let options = RollingOptions {
        evacuate: config.evacuate.clone(),
        hook,
        reboot: !args.no_reboot,
        boot_timeout: Duration::from_secs(
            args.boot_timeout
                .unwrap_or(config.rolling.boot_timeout_secs),
        ),
        poll: Duration::from_secs_f64(config.migration.poll_secs),
        return_home: !args.stay && config.evacuate.return_home,
        stop_left: args.stop_left,
        parallel: args.parallel.map_or(config.rolling.parallel, usize::from),
    };
    let scheduler = load::scheduler(&config)?;
    let acting = super::lease::Acting {
        command: "rolling",
        dry_run: args.dry_run,
        wait: args.wait.map(Duration::from_secs),
        nodes: &args.nodes,
    };
    let work = async |executor: Executor, held: Option<&super::lease::Held>, _: Option<&_>| {
        if args.dry_run {
            return schedule(&executor, &args.nodes, &options).await;
        }
        let executor = super::lease::stoppable(executor, held);
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
            Err(e @ RollingError::Stopped { .. }) => {
                say(format!(
                    "stopped (exit code 1): {e}; run the same command again to continue"
                ));
                Ok(ExitCode::from(1))
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
    super::lease::run_in_zone(&config, &zone, &scheduler, acting, work)
}

/// Prints the schedule: per node, what leaves it, the bytes, an estimate of the time at the
/// expected bandwidth, and the steps after.
async fn schedule(
    executor: &Executor,
    nodes: &[String],
    options: &RollingOptions,
) -> Result<ExitCode> {
    // A long dry run (a thousand nodes) says how far it got as it goes, on stderr.
    let planned = |p: Planned| {
        tell(format!(
            "node {}/{} planned: {}, {} migration(s){}",
            p.count,
            p.total,
            p.node,
            p.migrations,
            match p.unplaced {
                0 => String::new(),
                n => format!(", {n} guest(s) fit nowhere"),
            }
        ));
    };
    let schedule = match executor.rolling_schedule(nodes, options, &planned).await {
        Err(e @ flxp_engine::Error::UnknownNode { .. }) => {
            return Err(UsageError(e.to_string()).into());
        }
        other => other.context("cannot plan the rolling maintenance")?,
    };
    for n in &schedule.nodes {
        let node = &n.node;
        let Some(plan) = &n.plan else {
            say(format!("{node}: done by an earlier run, skipped"));
            continue;
        };
        let mut steps = vec![format!(
            "{node}: evacuate {} migration(s), {} to copy, about {}",
            plan.migrations.len(),
            fmt_bytes(plan.bytes),
            fmt_secs(n.secs)
        )];
        steps.extend(n.steps.iter().cloned());
        let wave = if options.parallel > 1 {
            format!("wave {}: ", n.wave)
        } else {
            String::new()
        };
        say(format!("{wave}{}", steps.join(" → ")));
        if let Some(why) = &n.held_back {
            say(format!("    not out with the wave before: {why}"));
        }
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
            say(format!(
                "    {} {} fits on no other node: {}",
                u.vmid, u.name, u.reason
            ));
        }
    }
    say(format!(
        "total: {} migration(s) out, {} to copy, about {} of migrations (as many back home)",
        schedule.migrations,
        fmt_bytes(schedule.bytes),
        fmt_secs(schedule.secs)
    ));
    Ok(if schedule.unmet {
        ExitCode::from(UNSATISFIABLE)
    } else {
        ExitCode::SUCCESS
    })
}
