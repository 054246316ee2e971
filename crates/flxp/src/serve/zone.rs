//! One zone as the service holds it: its metered API, the VM creator with the zone's
//! reservations, and fresh cluster models shared between requests that arrive together.
//!
//! flxp keeps no state about the cluster: every decision reads a snapshot taken after the request
//! arrived. Requests that arrive while a snapshot is being taken wait for the next one, and every
//! request waiting for the same snapshot shares it, so a burst of requests costs a few snapshots,
//! not one each, and none decides on a cluster older than itself.

use std::sync::{Arc, Mutex};

use flxp_core::Overrides;
use flxp_engine::{ClusterModel, Creator};
use flxp_pve::PveApi;
use tokio::sync::OnceCell;
use tokio::time::{Duration, Instant};

/// Why a zone's cluster could not be read.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct ReadError(pub String);

type Shared = Arc<OnceCell<Result<Arc<ClusterModel>, ReadError>>>;

struct Inflight {
    started: Instant,
    cell: Shared,
}

/// One Proxmox cluster served by `flxp serve`.
pub struct Zone {
    /// Its name in the config.
    pub name: String,
    /// Its API (metered).
    pub api: Arc<dyn PveApi>,
    /// Node overrides from the config.
    pub overrides: Overrides,
    /// Creates VMs; holds the zone's reservations.
    pub creator: Creator,
    last_answer: Arc<Mutex<Option<Instant>>>,
    latest: tokio::sync::Mutex<Option<Inflight>>,
}

impl std::fmt::Debug for Zone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Zone").field("name", &self.name).finish()
    }
}

impl Zone {
    /// A zone; `last_answer` is the clock its metered API sets.
    pub fn new(
        name: &str,
        api: Arc<dyn PveApi>,
        overrides: Overrides,
        creator: Creator,
        last_answer: Arc<Mutex<Option<Instant>>>,
    ) -> Self {
        Self {
            name: name.to_owned(),
            api,
            overrides,
            creator,
            last_answer,
            latest: tokio::sync::Mutex::new(None),
        }
    }

    /// A model of the cluster from a snapshot taken after this call began.
    pub async fn model(&self) -> Result<Arc<ClusterModel>, ReadError> {
        let arrived = Instant::now();
        let cell = {
            let mut latest = self.latest.lock().await;
            match &*latest {
                Some(f) if f.started >= arrived => Arc::clone(&f.cell),
                _ => {
                    let cell: Shared = Arc::new(OnceCell::new());
                    *latest = Some(Inflight {
                        started: Instant::now(),
                        cell: Arc::clone(&cell),
                    });
                    cell
                }
            }
        };
        cell.get_or_init(|| self.read()).await.clone()
    }

    async fn read(&self) -> Result<Arc<ClusterModel>, ReadError> {
        let snapshot = flxp_engine::collect_snapshot(self.api.as_ref(), epoch_now())
            .await
            .map_err(|e| ReadError(format!("cannot read zone {}: {}", self.name, chain(&e))))?;
        ClusterModel::from_snapshot(&snapshot, &self.overrides)
            .map(Arc::new)
            .map_err(|e| ReadError(format!("zone {}: {e}", self.name)))
    }

    /// Whether Proxmox answered within `window`.
    pub fn answered_within(&self, window: Duration) -> bool {
        self.last_answer().is_some_and(|t| t.elapsed() <= window)
    }

    /// When Proxmox last answered.
    pub fn last_answer(&self) -> Option<Instant> {
        *self.last_answer.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// An error with its sources, one line.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// Seconds since the epoch: the time a snapshot is taken at.
pub fn epoch_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or_default()
}
