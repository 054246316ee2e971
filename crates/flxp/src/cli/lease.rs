//! The zone's lease for a one-off run with `--zone` (`balance`, `evacuate`, `consolidate`): taken
//! before anything is written (marks included), renewed while the run lasts, released at its end.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{Context, Result};
use flxp_core::placement::Placer;
use flxp_engine::{Executor, LeaseKeeper, Stop, stop_signal};

use super::UsageError;
use crate::config::Config;

/// Runs `work` in `zone` with the zone's executor on a runtime of its own, under the zone's lease
/// when `[lease] enabled` and the run writes (not `dry_run`): taken before anything is written
/// (marks included), released when `work` ends. `work` gets the keeper too, to ask which node the
/// lease keeps in service.
pub(crate) fn run_in_zone<T>(
    config: &Config,
    zone: &str,
    placer: Arc<Placer>,
    dry_run: bool,
    work: impl AsyncFnOnce(Executor, Option<&Held>, Option<&LeaseKeeper>) -> Result<T>,
) -> Result<T> {
    config.zone(zone).map_err(UsageError::from)?;
    let api: flxp_pve::Pve = config.client(zone)?.into();
    let executor = Executor::new(zone.to_owned(), api.clone(), placer)
        .with_overrides(config.overrides(zone))
        .with_options(super::balance::execute_options(config));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let keeper = keeper(config, zone, &api);
    runtime.block_on(async {
        let held = Held::take_if(keeper.as_ref(), dry_run).await?;
        let result = work(executor, held.as_ref(), keeper.as_deref()).await;
        Held::end(held, result).await
    })
}

/// The zone's lease keeper, when `[lease] enabled`.
fn keeper(config: &Config, zone: &str, api: &flxp_pve::Pve) -> Option<Arc<LeaseKeeper>> {
    config.lease_settings().map(|l| {
        Arc::new(LeaseKeeper::new(
            api.clone(),
            zone.to_owned(),
            l.nodes.get(zone).cloned(),
            l.options,
        ))
    })
}

/// The node holding the zone's lease, which a consolidation must keep in service; empty without
/// a lease (or when its node cannot be told: then the run that needs the lease refuses anyway).
pub(crate) async fn kept_nodes(keeper: Option<&LeaseKeeper>) -> BTreeMap<String, String> {
    let mut kept = BTreeMap::new();
    if let Some(Ok(held)) = match keeper {
        Some(k) => Some(k.node_to_keep().await),
        None => None,
    } {
        kept.insert(held.node.clone(), held.to_string());
    }
    kept
}

/// The lease held by this run: renewed in the background until released.
pub(crate) struct Held {
    keeper: Arc<LeaseKeeper>,
    lapsed: Stop,
    renew: tokio::task::JoinHandle<()>,
}

impl Held {
    /// Takes the lease, or refuses naming the holder; nothing has been written either way.
    pub(crate) async fn take(keeper: Arc<LeaseKeeper>) -> Result<Self> {
        keeper.tick().await;
        if !keeper.holding() {
            anyhow::bail!(
                "{}; nothing was changed (stop that flxp, or try again later)",
                keeper.refusal()
            );
        }
        let (lapse, lapsed) = stop_signal();
        let k = Arc::clone(&keeper);
        let renew = tokio::spawn(async move {
            let renew = k.keep(|| {});
            tokio::pin!(renew);
            loop {
                tokio::select! {
                    () = &mut renew => {}
                    () = tokio::time::sleep(k.options().renew_every()) => {}
                }
                if !k.holding() {
                    tracing::error!("the zone's lease lapsed: starting no new migration");
                    lapse.stop();
                }
            }
        });
        Ok(Self {
            keeper,
            lapsed,
            renew,
        })
    }

    /// Raised when the lease lapses: the run starts nothing new.
    pub(crate) fn lapsed(&self) -> Stop {
        self.lapsed.clone()
    }

    /// Stops renewing and gives the lease up, so a daemon takes over at once.
    pub(crate) async fn release(self) {
        self.renew.abort();
        // Waits until the renewal is gone, so that no renewal follows the release.
        let _ = self.renew.await;
        self.keeper.release().await;
    }

    /// Takes the lease when a run needs it (not dry, `[lease] enabled`).
    async fn take_if(keeper: Option<&Arc<LeaseKeeper>>, dry_run: bool) -> Result<Option<Self>> {
        match keeper {
            Some(k) if !dry_run => Ok(Some(Self::take(Arc::clone(k)).await?)),
            _ => Ok(None),
        }
    }

    /// Releases the lease, if held, and passes `result` on.
    async fn end<T>(held: Option<Self>, result: T) -> T {
        if let Some(h) = held {
            h.release().await;
        }
        result
    }
}
