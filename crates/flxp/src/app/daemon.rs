//! What a daemon round, run by `flxp daemon` or by `flxp serve`, logs, and how both carry out
//! plans.

use std::time::Duration;

use flxp_engine::{DaemonOptions, ExecuteOptions, Limits, RoundReport};

use crate::config::Config;

/// The daemon's options from the config file (`flxp daemon`'s; `flxp serve` keeps another
/// retry).
pub fn options(config: &Config) -> DaemonOptions {
    let d = &config.daemon;
    let interval = Duration::from_secs(d.interval_secs);
    DaemonOptions {
        interval,
        // An unreadable zone is tried again sooner, but never more often than the interval.
        retry_after: interval.min(Duration::from_secs(60)),
        rebalance: d.rebalance,
        evacuate: d.evacuate,
        balance: config.balance.clone(),
        evacuation: config.evacuate.clone(),
        execute: execute_options(config),
        stale: config.create_vm.stale(),
        power: config.consolidate.auto(),
        smoothing: Duration::from_secs(config.daemon.smoothing_secs),
    }
}

/// How the `[migration]` table carries out plans.
pub fn execute_options(config: &Config) -> ExecuteOptions {
    let m = &config.migration;
    ExecuteOptions {
        limits: Limits {
            parallel: m.parallel,
            per_node_in: m.per_node_in,
            per_node_out: m.per_node_out,
        },
        poll: Duration::from_secs_f64(m.poll_secs),
        timeout: Duration::from_secs(m.timeout_secs),
        with_local_disks: m.with_local_disks,
        max_replans: m.max_replans,
        drain_timeout: Duration::from_secs(m.drain_timeout_secs),
        full_read_every: Duration::from_secs(config.daemon.full_read_secs),
        read_pressure: config.balance.trigger.pressure.is_enabled(),
        ..ExecuteOptions::default()
    }
}

/// One warning per guest a round's plans had to leave where it is, with why: "1 guest(s) fit
/// nowhere" every round is no help without the name and the reason.
pub fn log_unplaced(r: &RoundReport) {
    for executed in [&r.evacuation, &r.balance].into_iter().flatten() {
        for u in &executed.plan.unplaced {
            tracing::warn!(
                zone = %r.zone,
                vmid = u.vmid,
                name = %u.name,
                node = %u.node,
                rule = %u.rule,
                reason = %u.reason,
                "guest stays: no node can take it"
            );
        }
    }
}

/// One warning per thing power saving could not do in a round.
pub fn log_power(r: &RoundReport) {
    for e in r.power.iter().flat_map(|p| &p.errors) {
        tracing::warn!(zone = %r.zone, error = %e, "power saving");
    }
}
