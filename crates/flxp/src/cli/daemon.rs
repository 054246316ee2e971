//! `flxp daemon`: rebalance and evacuate every configured zone (or `[daemon].zones`) at an
//! interval, until SIGTERM or SIGINT; then start nothing new, let running migrations end (within
//! `[migration] drain-timeout-secs`) and exit 0.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use flxp_engine::{Daemon, RoundReport, Zone};

use super::UsageError;
use crate::config::Config;

/// Arguments of `flxp daemon`.
#[derive(Debug, clap::Args)]
// A negative number is a value the parser names its option for, not an unknown flag.
#[command(allow_negative_numbers = true)]
pub struct Args {
    /// Config file (else FLXP_CONFIG, else /etc/flxp/flxp.toml).
    #[arg(long, value_name = "F", env = "FLXP_CONFIG")]
    config: Option<PathBuf>,
}

/// The zones the daemon manages, each with its client and overrides.
pub fn zones(config: &Config) -> Result<Vec<Zone>> {
    let names: Vec<String> = if config.daemon.zones.is_empty() {
        config.zones.keys().cloned().collect()
    } else {
        config.daemon.zones.clone()
    };
    if let Some(refusal) = crate::app::startup::daemon_refusal(config) {
        return Err(UsageError(refusal).into());
    }
    names
        .into_iter()
        .map(|name| {
            config.zone(&name).map_err(UsageError::from)?;
            let client = config.client(&name)?;
            Ok(Zone {
                overrides: config.overrides(&name),
                api: client.into(),
                name,
                // `flxp daemon` creates no VMs: nothing to reserve.
                reservations: None,
            })
        })
        .collect()
}

/// Logs once, at start, each per-node setting naming a node of no zone, as `flxp config check`
/// warns of it. Reads the zones only when there is such a setting; a zone that cannot be read is
/// left to the first round to report.
async fn warn_unknown_nodes(config: &Config, zones: &[Zone]) {
    if config.placement.node_reserve.is_empty() {
        return;
    }
    let mut read = Vec::new();
    for z in zones {
        let Ok(snapshot) = flxp_engine::collect_snapshot(&z.api, flxp_engine::epoch_now()).await
        else {
            continue;
        };
        if let Ok(cluster) = flxp_core::Cluster::from_snapshot(&snapshot, &z.overrides) {
            read.push((z.name.as_str(), cluster));
        }
    }
    let clusters: crate::app::preflight::Clusters = read.iter().map(|(n, c)| (*n, c)).collect();
    for w in crate::app::preflight::unknown_nodes(config, &clusters) {
        tracing::warn!("{w}");
    }
}

/// One log line per round.
fn log_round(r: &RoundReport) {
    crate::app::daemon::log_unplaced(r);
    crate::app::daemon::log_power(r);
    let what = |e: &Option<flxp_engine::daemon::Executed>| {
        e.as_ref().map(|x| {
            let done = x.execution.as_ref().map_or(0, |r| r.done.len());
            let failed = x.execution.as_ref().map_or(0, |r| r.failed.len());
            let unknown = x.execution.as_ref().map_or(0, |r| r.unknown.len());
            if unknown > 0 {
                format!(
                    "{} ({done} done, {failed} failed, {unknown} with unknown outcome)",
                    x.plan.summary
                )
            } else {
                format!("{} ({done} done, {failed} failed)", x.plan.summary)
            }
        })
    };
    if r.standby.is_some() {
        // Logged once per holder by the lease keeper: "standby: zone X is held by H until T".
        return;
    }
    match &r.error {
        Some(e) => {
            tracing::error!(zone = %r.zone, error = %e, retry_in_secs = r.next_in_secs, "round failed")
        }
        None => tracing::info!(
            zone = %r.zone,
            evacuation = what(&r.evacuation).unwrap_or_else(|| "-".into()),
            trigger = r.trigger.as_ref().map_or("-", |t| t.reason.as_str()),
            balance = what(&r.balance).unwrap_or_else(|| "-".into()),
            power = r.power.as_ref().map_or("-", |p| p.decision.as_str()),
            next_in_secs = r.next_in_secs,
            "round"
        ),
    }
}

/// Runs `flxp daemon`.
pub fn run(args: Args) -> Result<ExitCode> {
    let config = Config::load(&Config::path(args.config.as_deref()))?;
    // What `flxp config check` runs too: the same config passes both or neither.
    let scheduler = crate::app::startup::check_engine(&config)?;
    let zones = zones(&config)?;
    let options = crate::app::daemon::options(&config);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    // What `flxp config check` refuses, refused here too.
    let apis = zones.iter().map(|z| (z.name.as_str(), &z.api));
    runtime.block_on(crate::app::startup::check_lease_nodes(&config, apis))?;
    runtime.block_on(warn_unknown_nodes(&config, &zones));
    let notify = {
        let _in = runtime.enter();
        crate::notify::Notifier::start(&config, "daemon")
    };
    let watch = crate::notify::RoundWatch::new(config.lease.enabled);
    let sender = notify.clone();
    let mut daemon = Daemon::new(zones, &scheduler, options.clone()).on_round(Arc::new(move |r| {
        sender.send_all(watch.events(r));
        log_round(r);
    }));
    if let Some(lease) = config.lease_settings("daemon") {
        tracing::info!(
            holder = %lease.options.holder,
            ttl_secs = lease.options.ttl.as_secs(),
            margin_secs = lease.options.margin.as_secs(),
            "acting only while holding each zone's lease"
        );
        daemon = daemon.with_lease(lease);
    } else {
        tracing::warn!(
            "[lease] enabled = false: nothing keeps another flxp from acting on these zones at the same time"
        );
    }
    tracing::info!(
        zones = %daemon.zones().join(", "),
        interval_secs = options.interval.as_secs(),
        rebalance = options.rebalance,
        evacuate = options.evacuate,
        power_saving = options.power.is_some(),
        "daemon started"
    );
    // Listening starts before the daemon does, and once: a second signal sent right after the
    // first is kept for the second wait, never lost.
    let mut signals = runtime.block_on(async { crate::signal::StopSignals::listen() });
    runtime.block_on(daemon.run(async move {
        signals.next().await;
        tracing::info!(
            "stop requested: no new migrations; waiting for running ones (signal again to quit)"
        );
        // A second signal quits at once: running migrations go on in Proxmox, and a restarted
        // flxp recognises them from their locks and tasks.
        tokio::spawn(async move {
            signals.next().await;
            tracing::warn!("second stop signal: quitting without waiting for running migrations");
            std::process::exit(1);
        });
    }));
    runtime.block_on(daemon.release_leases());
    // What the last rounds told is sent before the process goes, within bounds.
    runtime.block_on(notify.flush(crate::notify::FLUSH));
    tracing::info!("daemon stopped");
    Ok(ExitCode::SUCCESS)
}
