//! Reading the cluster a command works on (a snapshot file or stdin, or a live zone) and the
//! config that goes with it.

use std::path::Path;

use anyhow::{Context, Result};
use flxp_core::{Model, Overrides, Scheduler, Snapshot};

use super::{SourceArgs, UsageError};
use crate::config::Config;

/// Reads a snapshot file; `-` is stdin. Errors name the file.
pub fn read_snapshot_file(path: &Path) -> Result<Snapshot> {
    let limit = crate::input::MAX_SNAPSHOT_BYTES;
    let text = if path.as_os_str() == "-" {
        crate::input::read_limited(std::io::stdin().lock(), limit, "the snapshot on stdin")?
    } else {
        let what = format!("snapshot file {}", path.display());
        let file = std::fs::File::open(path).with_context(|| format!("cannot read {what}"))?;
        crate::input::read_limited(file, limit, &what)?
    };
    Snapshot::from_json(&text).with_context(|| format!("in {}", input_name(path)))
}

/// How errors name a snapshot source: `stdin` for `-`, else the path.
pub fn input_name(path: &Path) -> String {
    if path.as_os_str() == "-" {
        "stdin".to_owned()
    } else {
        path.display().to_string()
    }
}

/// The config the source arguments call for: always for `--zone`; with `--from-file` only when a
/// config file was named (flag or `FLXP_CONFIG`), else the built-in defaults.
pub fn config(source: &SourceArgs) -> Result<Config> {
    match (&source.config, &source.zone) {
        (Some(path), _) => Ok(Config::load(path)?),
        (None, Some(_)) => Ok(Config::load(&Config::path(None))?),
        (None, None) => Ok(Config::default()),
    }
}

/// The scheduler the config describes, with the built-in balancing methods.
pub fn scheduler(config: &Config) -> Result<Scheduler> {
    crate::app::scheduler::builtin(config)
}

/// Takes a live snapshot of a zone.
pub fn live_snapshot(config: &Config, zone: &str) -> Result<Snapshot> {
    config.zone(zone).map_err(UsageError::from)?;
    let client = config.client(zone)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime
        .block_on(flxp_engine::collect_snapshot(
            &client,
            flxp_engine::epoch_now(),
        ))
        .with_context(|| format!("cannot read zone {zone}"))
}

/// Loads the cluster the source arguments name, with the config's overrides for a zone.
pub fn load(source: &SourceArgs, config: &Config) -> Result<Model> {
    match (&source.from_file, &source.zone) {
        (Some(path), _) => {
            let snap = read_snapshot_file(path)?;
            Model::from_snapshot(&snap, &Overrides::default())
                .with_context(|| format!("in {}", input_name(path)))
        }
        (None, Some(zone)) => {
            let snap = live_snapshot(config, zone)?;
            Model::from_snapshot(&snap, &config.overrides(zone))
                .with_context(|| format!("zone {zone}"))
        }
        (None, None) => Err(no_cluster()),
    }
}

/// The usage error when neither `--from-file` nor `--zone` names the cluster.
pub fn no_cluster() -> anyhow::Error {
    UsageError(
        "name the cluster: --from-file F (a snapshot) or --zone Z (from the config file)".into(),
    )
    .into()
}

/// A snapshot file's model for planning, held as in a zone: a guest whose HA move was just
/// requested is HA's to finish.
pub fn model_to_plan(path: &Path) -> Result<Model> {
    let mut snapshot = read_snapshot_file(path)?;
    if let Some(time) = snapshot.time {
        flxp_engine::planning::hold_pending_ha(&mut snapshot, time);
    }
    Model::from_snapshot(&snapshot, &Overrides::default())
        .with_context(|| format!("in {}", input_name(path)))
}
