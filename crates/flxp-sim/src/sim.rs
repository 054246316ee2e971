//! [`Sim`]: the simulated cluster as a cheap, cloneable handle shared by every request: the world
//! behind one lock, the credentials, the clock and the per-request settings.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::auth::{Auth, TokenSpec};
use crate::clock::Clock;
use crate::world::World;
use crate::{Result, Scenario};

/// A running simulated cluster (without its HTTP server): clone it freely.
#[derive(Clone)]
pub struct Sim {
    inner: Arc<Inner>,
}

struct Inner {
    world: Mutex<World>,
    auth: Auth,
    clock: Clock,
    latency: Duration,
    auth_delay: Duration,
    fingerprint: Mutex<Option<String>>,
}

impl std::fmt::Debug for Sim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sim")
            .field("auth", &self.inner.auth)
            .field("latency", &self.inner.latency)
            .finish_non_exhaustive()
    }
}

impl Sim {
    /// Starts the simulated cluster of a scenario; its clock starts now.
    pub fn new(scenario: Scenario) -> Result<Self> {
        let tokens: Vec<TokenSpec> = scenario.tokens()?;
        let users = scenario
            .sim
            .users
            .iter()
            .map(|u| (u.userid.clone(), u.password.clone(), u.readonly))
            .collect();
        let start = scenario.start_time();
        let world = World::build(&scenario, start)?;
        for warning in world.memory_warnings() {
            tracing::warn!("scenario: {warning}");
        }
        Ok(Sim {
            inner: Arc::new(Inner {
                world: Mutex::new(world),
                auth: Auth::new(tokens, users),
                clock: Clock::new(start, scenario.sim.time_scale.unwrap_or(1.0)),
                latency: Duration::from_millis(scenario.sim.latency_ms.unwrap_or(0)),
                auth_delay: Duration::from_millis(
                    scenario.sim.auth_failure_delay_ms.unwrap_or(100),
                ),
                fingerprint: Mutex::new(None),
            }),
        })
    }

    /// The world, caught up to the current simulated time.
    pub fn world(&self) -> MutexGuard<'_, World> {
        let now = self.inner.clock.now();
        let mut w = self.inner.world.lock().unwrap_or_else(|e| e.into_inner());
        w.advance(now);
        w
    }

    /// The current simulated time, epoch seconds.
    pub fn now(&self) -> f64 {
        self.inner.clock.now()
    }

    /// The clock (to advance simulated time).
    pub fn clock(&self) -> &Clock {
        &self.inner.clock
    }

    /// The credentials.
    pub fn auth(&self) -> &Auth {
        &self.inner.auth
    }

    /// Latency added to every request.
    pub fn latency(&self) -> Duration {
        self.inner.latency
    }

    /// Delay before a failed authentication is answered.
    pub fn auth_delay(&self) -> Duration {
        self.inner.auth_delay
    }

    /// The TLS certificate's SHA-256 fingerprint, once served over HTTPS (shown by `/nodes`).
    pub fn fingerprint(&self) -> Option<String> {
        self.inner
            .fingerprint
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Records the TLS certificate's fingerprint.
    pub fn set_fingerprint(&self, fp: String) {
        *self
            .inner
            .fingerprint
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(fp);
    }

    /// The HTTP router of the API and the control endpoint.
    pub fn router(&self) -> axum::Router {
        crate::api::router(self.clone())
    }
}
