//! How the API carries plans out: a zone's executor and the options of a rolling maintenance,
//! shared by the queries that show a schedule and the mutations that act.

use std::sync::Arc;

use flxp_engine::Executor;

use crate::serve::dashboard::live::LiveProgress;
use crate::serve::metrics::MigrationMeter;
use crate::serve::state::AppState;

/// How the API's rolling maintenance runs: the config's evacuation, hook and boot timeout.
pub(crate) fn rolling_options(s: &AppState, reboot: bool) -> flxp_engine::rolling::RollingOptions {
    flxp_engine::rolling::RollingOptions {
        evacuate: s.config.evacuate.clone(),
        hook: s.config.rolling.hook(),
        reboot,
        boot_timeout: std::time::Duration::from_secs(s.config.rolling.boot_timeout_secs),
        poll: s.execute.poll,
        return_home: s.config.evacuate.return_home,
        parallel: s.config.rolling.parallel,
        ..flxp_engine::rolling::RollingOptions::default()
    }
}

/// The executor runs of a zone carry plans out with: its reservations, options, stop and progress.
pub(crate) fn executor_for(s: &AppState, zone: &str, z: &crate::serve::zone::Zone) -> Executor {
    executor_with(s, zone, z, live_progress(s))
}

/// [`executor_for`] with `progress`, which the caller keeps to read its counts.
pub(crate) fn executor_with(
    s: &AppState,
    zone: &str,
    z: &crate::serve::zone::Zone,
    progress: Arc<LiveProgress>,
) -> Executor {
    Executor::new(zone, z.api.clone(), &s.scheduler)
        .with_overrides(z.overrides.clone())
        .with_reservations(Some(Arc::clone(z.creator.reservations())))
        .with_options(s.execute.clone())
        .with_stop(s.stop.clone())
        .with_progress(progress)
}

/// A run's progress: counted in the metrics and sent live.
pub(crate) fn live_progress(s: &AppState) -> Arc<LiveProgress> {
    Arc::new(LiveProgress::new(
        Some(MigrationMeter(Arc::clone(&s.metrics))),
        Arc::clone(&s.live),
    ))
}
