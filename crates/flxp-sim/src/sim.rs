//! [`Sim`]: the simulated cluster as a cheap, cloneable handle shared by every request: the world
//! behind one lock, the credentials, the clock and the per-request settings.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::auth::{Auth, TokenSpec};
use crate::clock::Clock;
use crate::faults::Faults;
use crate::world::{StorageUse, World};
use crate::{Result, Scenario};

/// A running simulated cluster (without its HTTP server): clone it freely.
#[derive(Clone)]
pub struct Sim {
    inner: Arc<Inner>,
}

struct Inner {
    world: Mutex<Derived>,
    auth: Auth,
    clock: Clock,
    latency: Duration,
    auth_delay: Duration,
    fingerprint: Mutex<Option<String>>,
}

/// The world and what is derived from it, kept until the world changes.
struct Derived {
    world: World,
    /// Volume bytes per storage; `None` once the world may have changed.
    storage_use: Option<StorageUse>,
}

/// The locked world ([`Sim::world`]): reads go through as they are; the first mutable access
/// drops what was derived from the world (the storage use), as the world may change under it.
pub struct WorldGuard<'a> {
    inner: MutexGuard<'a, Derived>,
}

impl std::ops::Deref for WorldGuard<'_> {
    type Target = World;

    fn deref(&self) -> &World {
        &self.inner.world
    }
}

impl std::ops::DerefMut for WorldGuard<'_> {
    fn deref_mut(&mut self) -> &mut World {
        self.inner.storage_use = None;
        &mut self.inner.world
    }
}

impl WorldGuard<'_> {
    /// The world with its volume bytes per storage, summed on the first call after a change
    /// and reused until the next one.
    pub fn storage_use(&mut self) -> (&World, &StorageUse) {
        let d = &mut *self.inner;
        let usage = d
            .storage_use
            .get_or_insert_with(|| StorageUse::of(&d.world));
        (&d.world, usage)
    }

    /// The injected faults, to count a fault's uses: they change nothing derived from the world.
    pub fn faults_mut(&mut self) -> &mut Faults {
        &mut self.inner.world.faults
    }

    /// The records, to count a request: they change nothing derived from the world.
    pub fn records_mut(&mut self) -> &mut crate::world::Records {
        &mut self.inner.world.records
    }

    /// Whether the storage use is summed and kept (for tests of when it is dropped).
    pub fn storage_use_kept(&self) -> bool {
        self.inner.storage_use.is_some()
    }
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
        crate::schema::ApiSchema::load()?;
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
                world: Mutex::new(Derived {
                    world,
                    storage_use: None,
                }),
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
    pub fn world(&self) -> WorldGuard<'_> {
        let now = self.inner.clock.now();
        let mut inner = self.inner.world.lock().unwrap_or_else(|e| e.into_inner());
        // Time alone changes no storage figure; a due event (a migration landing) may.
        if inner.world.advance(now) {
            inner.storage_use = None;
        }
        WorldGuard { inner }
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
