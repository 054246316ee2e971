//! The zone's lease for a one-off run with `--zone` (`balance`, `evacuate`, `consolidate`,
//! `maintenance`): taken before anything is written (marks included), renewed while the run lasts,
//! released at its end. A zone another flxp acts on is refused naming it, or waited for with
//! `--wait SECS`; dry runs never take or wait for the lease.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use flxp_core::Scheduler;
use flxp_engine::{Executor, LeaseKeeper, LeaseRefused, Stop, stop_signal};

use super::UsageError;
use crate::config::Config;

/// How a one-off run that may act takes the zone's lease.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Acting<'a> {
    /// The flxp command (`evacuate`), written beside the holder so that others can name it.
    pub(crate) command: &'a str,
    /// Only plans: takes no lease and waits for none.
    pub(crate) dry_run: bool,
    /// How long to wait for the lease of a zone another flxp acts on (`--wait SECS`); `None`
    /// refuses at once.
    pub(crate) wait: Option<Duration>,
    /// Nodes the command names: checked against the cluster before the lease is taken, so that
    /// a typo is a usage error that never held the zone.
    pub(crate) nodes: &'a [String],
}

impl<'a> Acting<'a> {
    /// The same, naming `nodes` (see [`Acting::nodes`]).
    pub(crate) fn naming(self, nodes: &'a [String]) -> Self {
        Self { nodes, ..self }
    }
}

/// How often a run waiting for the lease reads it again: a released lease is taken within this.
const WAIT_POLL: Duration = Duration::from_secs(1);

/// Runs `work` in `zone` with the zone's executor on a runtime of its own, under the zone's lease
/// (unless `[lease] enabled = false` or the run is dry): taken before anything is written (marks
/// included), released when `work` ends. `work` gets the keeper too, to ask which node the lease
/// keeps in service.
pub(crate) fn run_in_zone<T>(
    config: &Config,
    zone: &str,
    scheduler: &Scheduler,
    acting: Acting<'_>,
    work: impl AsyncFnOnce(Executor, Option<&Held>, Option<&LeaseKeeper>) -> Result<T>,
) -> Result<T> {
    config.zone(zone).map_err(UsageError::from)?;
    let api: flxp_pve::Pve = config.client(zone)?.into();
    let executor = Executor::new(zone.to_owned(), api.clone(), scheduler)
        .with_overrides(config.overrides(zone))
        .with_options(crate::app::daemon::execute_options(config));
    under_lease(config, zone, &api, acting, async |held, keeper| {
        work(executor, held, keeper).await
    })
}

/// Runs `work` on a runtime of its own under `zone`'s lease (see [`run_in_zone`]), for a run
/// that needs no executor (`flxp maintenance`).
pub(crate) fn under_lease<T>(
    config: &Config,
    zone: &str,
    api: &flxp_pve::Pve,
    acting: Acting<'_>,
    work: impl AsyncFnOnce(Option<&Held>, Option<&LeaseKeeper>) -> Result<T>,
) -> Result<T> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let keeper = keeper(config, zone, api, acting.command);
    runtime.block_on(async {
        if keeper.is_some() && !acting.dry_run {
            check_named(api, acting.nodes).await?;
        }
        let held = Held::take_if(keeper.as_ref(), acting).await?;
        let result = work(held.as_ref(), keeper.as_deref()).await;
        Held::end(held, result).await
    })
}

/// Refuses a node name the cluster does not have, as a usage error listing its nodes (the same
/// words as the planner's), with one read of `/nodes`; nothing when no node is named.
async fn check_named(api: &flxp_pve::Pve, named: &[String]) -> Result<()> {
    if named.is_empty() {
        return Ok(());
    }
    let nodes = api
        .nodes()
        .await
        .context("cannot read the cluster's nodes")?;
    let mut known: Vec<String> = nodes.into_iter().map(|n| n.node).collect();
    known.sort();
    for name in named {
        if !known.iter().any(|k| k.eq_ignore_ascii_case(name)) {
            let e = flxp_engine::Error::UnknownNode {
                node: name.clone(),
                known: known.join(", "),
            };
            return Err(UsageError(e.to_string()).into());
        }
    }
    Ok(())
}

/// The zone's lease keeper, unless `[lease] enabled = false`.
fn keeper(
    config: &Config,
    zone: &str,
    api: &flxp_pve::Pve,
    command: &str,
) -> Option<Arc<LeaseKeeper>> {
    config.lease_settings(command).map(|l| {
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

/// Why a run stops when its lease lapses (said in its report).
const LAPSED: &str = "the zone's lease lapsed (it could not be renewed in time): another flxp may act on the zone now";

/// The lease held by this run: renewed in the background until released.
pub(crate) struct Held {
    keeper: Arc<LeaseKeeper>,
    lapsed: Stop,
    renew: tokio::task::JoinHandle<()>,
}

impl Held {
    /// Takes the lease, waiting up to `wait` while another flxp holds it, or refuses naming the
    /// holder; nothing has been written either way.
    pub(crate) async fn take(keeper: Arc<LeaseKeeper>, wait: Option<Duration>) -> Result<Self> {
        let start = tokio::time::Instant::now();
        let mut told = false;
        loop {
            keeper.tick().await;
            if keeper.holding() {
                break;
            }
            let refused = keeper.refused();
            let left = wait.map_or(Duration::ZERO, |w| w.saturating_sub(start.elapsed()));
            // Only a holder goes away by waiting: an error (a missing privilege) stays.
            if left.is_zero() || !matches!(refused, LeaseRefused::HeldElsewhere { .. }) {
                anyhow::bail!("{}", refusal(&refused, wait));
            }
            if !told {
                // Rounded up: `--wait 5` read a few milliseconds in says 5 s, not 4.
                crate::output::tell(format!(
                    "{refused}: waiting up to {} s for it",
                    left.as_secs_f64().ceil()
                ));
                told = true;
            }
            tokio::time::sleep(left.min(WAIT_POLL)).await;
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
                    lapse.stop_because(LAPSED);
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

    /// Takes the lease when a run needs it (not dry, lease not turned off).
    async fn take_if(
        keeper: Option<&Arc<LeaseKeeper>>,
        acting: Acting<'_>,
    ) -> Result<Option<Self>> {
        match keeper {
            Some(k) if !acting.dry_run => Ok(Some(Self::take(Arc::clone(k), acting.wait).await?)),
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

/// `executor` with a stop sent when `lease` (when held) lapses or at the first Ctrl-C or SIGTERM:
/// no new migration or step starts, running migrations are waited for and the run reports; a
/// second signal quits at once (running migrations go on in Proxmox, and a rerun continues).
/// Spawns its listeners: call it within the runtime.
pub(crate) fn stoppable(executor: Executor, lease: Option<&Held>) -> Executor {
    let (stop_handle, stop) = stop_signal();
    let stop_handle = Arc::new(stop_handle);
    if let Some(held) = lease {
        // With `[lease] enabled`, a run acts only while it holds the zone's lease.
        let mut lapsed = held.lapsed();
        let lapse = Arc::clone(&stop_handle);
        tokio::spawn(async move {
            lapsed.stopped().await;
            match lapsed.reason() {
                Some(why) => lapse.stop_because(&why),
                None => lapse.stop(),
            }
        });
    }
    let mut signals = crate::signal::StopSignals::listen();
    tokio::spawn(async move {
        signals.next().await;
        crate::output::tell(
            "stopping: no new migrations; waiting for running ones (Ctrl-C again to quit)",
        );
        stop_handle.stop();
        signals.next().await;
        std::process::exit(1);
    });
    executor.with_stop(stop)
}

/// Why a one-off run does not act, with what to do about it: the holder's kind decides.
fn refusal(refused: &LeaseRefused, wait: Option<Duration>) -> String {
    let waited = wait.map_or(String::new(), |w| {
        format!("after waiting {} s: ", w.as_secs())
    });
    let advice = match refused {
        LeaseRefused::HeldElsewhere { command, .. } => {
            let what = match command.as_deref() {
                Some("serve") => {
                    "That `flxp serve` holds it while a round or an API action acts (all the \
                     time with `[lease] hold = \"always\"`): pass --wait SECS to run after it, \
                     act through its API (GraphQL mutations, dashboard), or stop it first"
                }
                Some("daemon") => {
                    "That `flxp daemon` holds it while a round acts (all the time with `[lease] \
                     hold = \"always\"`): pass --wait SECS to run after it, or stop it first (a \
                     clean stop gives the lease up at once)"
                }
                _ => "Wait for that run to end, or pass --wait SECS to wait for it that long",
            };
            format!(
                ". {what}. A lease left by a flxp that was killed ends by itself: it is free \
                 margin-secs (5 s by default) after that expiry, which is at most ttl-secs (30 s by \
                 default) after its holder's last renewal"
            )
        }
        _ => String::new(),
    };
    format!("{waited}{refused}; nothing was changed{advice}")
}
