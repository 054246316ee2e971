//! The service's shared state: a small `Clone` struct of `Arc`s handed to every handler and
//! resolver (and to the daemon loop): the zones, the config, the placement pipeline, the metrics
//! and the accepted API tokens.

use std::collections::BTreeMap;
use std::sync::Arc;

use flxp_core::{Scheduler, State};
use flxp_engine::{ClusterModel, Daemon, ExecuteOptions, Stop};
use subtle::ConstantTimeEq;
use tokio::time::Duration;

use super::dashboard::live::Live;
use super::metrics::Metrics;
use super::schema::{ApiError, Code};
use super::zone::Zone;
use crate::config::Config;
pub use crate::config::Role;

/// Everything handlers share.
#[derive(Clone)]
pub struct AppState {
    /// Zones by name.
    pub zones: Arc<BTreeMap<String, Arc<Zone>>>,
    /// The config (profiles, images, networks, balance options, ...).
    pub config: Arc<Config>,
    /// What decides: the placement pipeline (asked per zone, so that plugins are told the
    /// zone) and the balancing methods names are parsed against (the built-in ones, or an
    /// embedder's, and the config's balance plugins).
    pub scheduler: Arc<Scheduler>,
    /// The metrics.
    pub metrics: Arc<Metrics>,
    /// The daemon loop; on-demand plans hold its zone lock so the two never overlap.
    pub daemon: Daemon,
    /// Accepted bearer tokens.
    pub tokens: Arc<Tokens>,
    /// A zone is ready when Proxmox answered within this window.
    pub ready_window: Duration,
    /// Whether the zones are the built-in simulated one.
    pub simulated: bool,
    /// How `rebalance`/`evacuate` carry out plans (`[migration]`).
    pub execute: ExecuteOptions,
    /// Set on shutdown: running plans start nothing new.
    pub stop: Stop,
    /// Creations and plans running in their own tasks.
    pub work: Arc<Work>,
    /// Live progress of runs, for `GET /events`.
    pub live: Arc<Live>,
    /// The audit log of actions asked of the API; `None` when `[audit] enabled = false`.
    pub audit: Option<Arc<crate::audit::AuditLog>>,
    /// The webhooks.
    pub notify: crate::notify::Notifier,
    /// The idempotency keys `createVM` was given.
    pub idempotency: Arc<super::schema::Idempotency>,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("zones", &self.zones.keys().collect::<Vec<_>>())
            .field("simulated", &self.simulated)
            .finish_non_exhaustive()
    }
}

impl AppState {
    /// A zone by name, or `UNKNOWN_ZONE` listing the known ones.
    pub fn zone(&self, name: &str) -> Result<&Arc<Zone>, ApiError> {
        self.zones.get(name).ok_or_else(|| {
            ApiError::new(
                Code::UnknownZone,
                format!(
                    "zone {name:?} is not configured; zones: {}",
                    self.zones.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            )
        })
    }

    /// [`Self::model`] of the zone named `name` (an unknown name is `UNKNOWN_ZONE`).
    pub async fn zone_model(&self, name: &str) -> Result<(Arc<ClusterModel>, State), ApiError> {
        self.model(self.zone(name)?).await
    }

    /// A fresh model of a zone and its state with the reservations of creations in flight.
    pub async fn model(&self, zone: &Arc<Zone>) -> Result<(Arc<ClusterModel>, State), ApiError> {
        let model = zone
            .model()
            .await
            .map_err(|e| ApiError::new(Code::Unavailable, e.0))?;
        let reservations = Arc::clone(zone.creator.reservations());
        let (measure, metric) = (self.config.balance.measure, self.config.balance.metric);
        let judged = Arc::clone(&model);
        let (state, imbalance) = blocking("applying reservations", move || {
            let mut state = judged.state.clone();
            reservations.apply(&judged.cluster, judged.taken, &mut state);
            let imbalance = flxp_core::balance::imbalance(&judged.cluster, &state, measure, metric);
            (state, imbalance)
        })
        .await?;
        self.metrics
            .set_reservations(&zone.name, zone.creator.reservations().len());
        self.metrics.set_imbalance(&zone.name, imbalance);
        Ok((model, state))
    }
}

/// Runs CPU-bound work (a model, placement, a plan, a status on a large cluster) on the blocking
/// pool ([`flxp_engine::blocking`]) so that the async workers stay free for other requests.
pub async fn blocking<T, F>(what: &'static str, f: F) -> Result<T, ApiError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    flxp_engine::blocking::run(what, f)
        .await
        .map_err(ApiError::internal)
}

/// Counts work running in its own tasks (creations, plans), so shutdown can wait for it.
#[derive(Debug)]
pub struct Work {
    running: tokio::sync::watch::Sender<usize>,
}

impl Default for Work {
    fn default() -> Self {
        Self {
            running: tokio::sync::watch::Sender::new(0),
        }
    }
}

/// Decrements the count when the task ends, however it ends.
struct Running(Arc<Work>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl Work {
    /// Runs `work` in its own task, counted until it ends.
    pub fn spawn<F>(self: &Arc<Self>, work: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.running.send_modify(|n| *n += 1);
        let guard = Running(Arc::clone(self));
        tokio::spawn(async move {
            let _guard = guard;
            work.await
        })
    }

    /// Tasks running now.
    pub fn running(&self) -> usize {
        *self.running.borrow()
    }

    /// Waits until no task runs, at most `timeout`; whether they all ended.
    pub async fn idle(&self, timeout: Duration) -> bool {
        let mut rx = self.running.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|n| *n == 0))
            .await
            .is_ok()
    }
}

/// Who sent an API request: the name of the token it carried (never the token) and its role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The token's configured name.
    pub name: String,
    /// What it may do.
    pub role: Role,
}

/// The accepted bearer tokens, kept as SHA-256 digests with their roles and names, and compared
/// in constant time.
pub struct Tokens {
    digests: Vec<([u8; 32], Role, String)>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tokens({} accepted)", self.digests.len())
    }
}

fn digest(token: &str) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

impl Tokens {
    /// Accepts these tokens as operators (empty strings are ignored).
    #[cfg(test)]
    pub fn new<'a>(tokens: impl IntoIterator<Item = &'a str>) -> Self {
        Self::with_roles(tokens.into_iter().map(|t| (t, Role::Operator)))
    }

    /// Accepts these tokens, each with its role, named `token-<i>` (empty strings are ignored).
    pub fn with_roles<'a>(tokens: impl IntoIterator<Item = (&'a str, Role)>) -> Self {
        Self::named(
            tokens
                .into_iter()
                .enumerate()
                .map(|(i, (t, r))| (t, r, format!("token-{i}"))),
        )
    }

    /// Accepts these tokens, each with its role and the name the audit log records (empty
    /// secrets are ignored).
    pub fn named<'a>(tokens: impl IntoIterator<Item = (&'a str, Role, String)>) -> Self {
        Self {
            digests: tokens
                .into_iter()
                .filter(|(t, _, _)| !t.is_empty())
                .map(|(t, r, n)| (digest(t), r, n))
                .collect(),
        }
    }

    /// How many tokens are accepted.
    pub fn len(&self) -> usize {
        self.digests.len()
    }

    /// Whether no token is accepted.
    pub fn is_empty(&self) -> bool {
        self.digests.is_empty()
    }

    /// Whether a presented token is one of them. Comparing fixed-size digests in constant time,
    /// and every one of them, tells an attacker neither a prefix nor which token matched.
    #[cfg(test)]
    pub fn accepts(&self, presented: &str) -> bool {
        self.role(presented).is_some()
    }

    /// The role of a presented token, if it is accepted.
    pub fn role(&self, presented: &str) -> Option<Role> {
        self.caller(presented).map(|c| c.role)
    }

    /// The name and role of a presented token, if it is accepted. It compares digests in
    /// constant time and looks at every one of them; a token listed twice gets the higher role.
    pub fn caller(&self, presented: &str) -> Option<Caller> {
        use subtle::ConditionallySelectable;
        let d = digest(presented);
        // 0: none, 1: viewer, 2: operator.
        let mut best = 0u8;
        let mut which = 0u32;
        for (i, (known, role, _)) in self.digests.iter().enumerate() {
            let rank = match role {
                Role::Viewer => 1u8,
                Role::Operator => 2u8,
            };
            let higher = known.ct_eq(&d) & subtle::Choice::from(u8::from(rank > best));
            best.conditional_assign(&rank, higher);
            which.conditional_assign(&u32::try_from(i).unwrap_or(u32::MAX), higher);
        }
        let role = match best {
            1 => Role::Viewer,
            2 => Role::Operator,
            _ => return None,
        };
        let name = self.digests.get(which as usize)?.2.clone();
        Some(Caller { name, role })
    }
}

/// A new random API token: 32 bytes as hex.
pub fn generate_token() -> anyhow::Result<String> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| anyhow::anyhow!("the system random generator failed"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may panic

    use super::*;

    #[test]
    fn tokens_match_exactly() {
        let t = Tokens::new(["alpha", "beta", ""]);
        assert_eq!(t.len(), 2);
        assert!(t.accepts("alpha") && t.accepts("beta"));
        assert!(!t.accepts("alph") && !t.accepts("alphaa") && !t.accepts(""));
        let g = generate_token().unwrap();
        assert_eq!(g.len(), 64);
        assert_ne!(g, generate_token().unwrap());
    }

    #[test]
    fn tokens_carry_their_roles() {
        let t = Tokens::with_roles([
            ("look", Role::Viewer),
            ("act", Role::Operator),
            ("both", Role::Viewer),
            ("both", Role::Operator),
        ]);
        assert_eq!(t.role("look"), Some(Role::Viewer));
        assert_eq!(t.role("act"), Some(Role::Operator));
        assert_eq!(t.role("both"), Some(Role::Operator));
        assert_eq!(t.role("lookx"), None);
        assert!(t.accepts("look"));
        assert_eq!(Tokens::new(["bare"]).role("bare"), Some(Role::Operator));
    }

    #[test]
    fn a_caller_is_known_by_its_token_name() {
        let t = Tokens::named([
            ("look-secret", Role::Viewer, "grafana".to_owned()),
            ("act-secret", Role::Operator, "ci".to_owned()),
        ]);
        let who = |s: &str| t.caller(s).map(|c| (c.name, c.role));
        assert_eq!(who("look-secret"), Some(("grafana".into(), Role::Viewer)));
        assert_eq!(who("act-secret"), Some(("ci".into(), Role::Operator)));
        assert_eq!(who("act-secre"), None);
    }
}
