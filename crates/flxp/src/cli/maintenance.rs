//! `flxp maintenance NODE --zone Z [--off [--stay]]`: set or clear the `flxp.maintenance` token in
//! a node's notes, as `flxp evacuate` sets it (recording first where its guests are at home); clearing removes exact `flxp.maintenance` tokens
//! only, then takes the guests recorded back home (unless `--stay` or `[evacuate]
//! return-home = false`). A mark makes the acting flxp empty the node (or fill it again), so it
//! is written under the zone's lease, as every run that acts.

use std::process::ExitCode;

use anyhow::{Context, Result};
use flxp_engine::Executor;

use super::{UsageError, balance, load};

/// Arguments of `flxp maintenance`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The node.
    #[arg(value_name = "NODE")]
    node: String,
    /// The zone of the config file the node is in.
    // Needed all the same, but not `required` to clap's parser: it checks before it hands the
    // subcommand a `--zone` given ahead of it (`flxp --zone Z ...`); `run` refuses a missing one.
    #[arg(long, value_name = "Z")]
    zone: Option<String>,
    /// Clear the mark instead of setting it.
    #[arg(long)]
    off: bool,
    /// With --off: leave the evacuated guests where they are instead of taking them back home.
    #[arg(long, requires = "off")]
    stay: bool,
    /// Config file (else FLXP_CONFIG, else /etc/flxp/flxp.toml).
    #[arg(long, value_name = "F", env = "FLXP_CONFIG")]
    config: Option<std::path::PathBuf>,
    /// When another flxp acts on the zone (holds its lease), wait up to SECS seconds for it
    /// instead of refusing at once.
    #[arg(long, value_name = "SECS")]
    wait: Option<u64>,
}

/// Runs `flxp maintenance`: prints whether the notes changed, and the guests' way back home.
pub fn run(args: Args) -> Result<ExitCode> {
    let (zone, config) =
        super::zone_config(args.zone.as_deref(), args.config.as_deref(), "maintenance")?;
    let on = !args.off;
    let back = !on && !args.stay && config.evacuate.return_home;
    let acting = super::lease::Acting {
        command: "maintenance",
        dry_run: false,
        wait: args.wait.map(std::time::Duration::from_secs),
        nodes: std::slice::from_ref(&args.node),
    };
    let scheduler = load::scheduler(&config)?;
    let options = config.evacuate.clone();
    let work = async |executor: Executor, held: Option<&super::lease::Held>, _: Option<&_>| {
        let nodes = executor
            .api()
            .nodes()
            .await
            .with_context(|| format!("cannot read zone {zone}"))?;
        let node = nodes
            .into_iter()
            .map(|n| n.node)
            .find(|n| n.eq_ignore_ascii_case(&args.node))
            .ok_or_else(|| UsageError(format!("node {:?} is not in zone {zone}", args.node)))?;
        if on {
            // The daemon empties the node once it reads the mark: where its guests come from is
            // written first, so that they go back when the maintenance ends.
            executor.record_homes(&node).await?;
        }
        let changed = flxp_engine::maintenance::set(executor.api(), &node, on).await?;
        if changed {
            let step = crate::notify::events::maintenance_step(&zone, &node, on);
            crate::notify::send_once(&config, "maintenance", vec![step]).await;
        }
        crate::output::tell(match (on, changed) {
            (true, true) => format!("{node}: flxp.maintenance added to its notes"),
            (true, false) => format!("{node}: already in maintenance"),
            (false, true) => format!("{node}: flxp.maintenance removed from its notes"),
            (false, false) => format!("{node}: no flxp.maintenance token in its notes"),
        });
        if !back {
            return anyhow::Ok(ExitCode::SUCCESS);
        }
        go_home(executor, &node, &options, &zone, held).await
    };
    super::lease::run_in_zone(&config, &zone, &scheduler, acting, work)
}

/// Takes the guests recorded as at home on `node` back there, then keeps in its notes only those
/// still away: exit 1 when a migration failed, 3 when a guest could not go back, else 0.
pub(crate) async fn go_home(
    executor: Executor,
    node: &str,
    options: &flxp_core::balance::EvacuateOptions,
    zone: &str,
    held: Option<&super::lease::Held>,
) -> Result<ExitCode> {
    let (goal, plan) = executor
        .plan_return(node, options)
        .await
        .with_context(|| format!("cannot plan the guests back to {node}"))?;
    if plan.migrations.is_empty() && plan.skipped.is_empty() {
        crate::output::tell(format!("{node}: no guest to take back"));
        executor.settle_homes(node).await?;
        return Ok(ExitCode::SUCCESS);
    }
    let reader = executor.clone();
    let (_, report) =
        balance::plan_and_run(executor, &goal, Some(plan), false, false, zone, held).await?;
    if let Some(r) = &report {
        crate::output::print_execution(r);
    }
    let away = reader.settle_homes(node).await?;
    // A failed migration (1) says more than a guest left away (3): the message names the code
    // the run exits with.
    let code = match &report {
        Some(r) if !r.is_clean() => 1,
        _ if !away.is_empty() => super::UNSATISFIABLE,
        _ => 0,
    };
    if !away.is_empty() {
        let list: Vec<String> = away.iter().map(u32::to_string).collect();
        crate::output::say(format!(
            "not met (exit code {code}): guest(s) {} stay away from {node} (kept in its notes for \
             the next return)",
            list.join(", ")
        ));
    }
    Ok(ExitCode::from(code))
}
