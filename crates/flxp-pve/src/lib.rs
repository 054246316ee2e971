//! The Proxmox VE API as flxp speaks it: one set of serde wire types (shared with the simulator)
//! and an async client.
//!
//! - [`types`]: request and response types, lenient when reading, exact when writing.
//! - [`Pve`]: one async method per endpoint, written once over a [`Transport`]; the type-erased
//!   `Pve` (cheap to clone) is what the engine holds.
//! - [`Transport`]: the one seam: sends a [`Request`] (method, path, form parameters, endpoint
//!   label) and returns the answer's `data` as JSON text ([`Data`]). Layers ([`Retry`], [`Logged`], metrics) wrap a transport; test doubles
//!   answer in memory through a [`Router`] (`GET /nodes/{node}/status` → handler).
//! - [`Client`]: `Pve` over HTTPS ([`HttpTransport`]) with token or ticket auth, pinned or
//!   CA-verified TLS, host failover and retries that never repeat a write.
//! - [`ZoneConfig`]: one `[zones.<name>]` table of the config file; [`Client::from_zone`].
//!
//! ```no_run
//! # async fn demo() -> flxp_pve::Result<()> {
//! use flxp_pve::{Client, Pve, ZoneConfig};
//! let zones = flxp_pve::zone::zones_from_toml(r#"
//!     [zones.lab]
//!     hosts = ["pve1.lab:8006"]
//!     token = "flxp@pve!scheduler"
//!     token-secret-env = "FLXP_LAB_TOKEN"
//! "#)?;
//! let client = Client::from_zone(&zones["lab"])?;
//! let resources = client.cluster_resources(None).await?;
//! // What the engine holds: the same endpoints over a type-erased transport.
//! let api: Pve = client.into();
//! let tasks = api.cluster_tasks().await?;
//! # Ok(()) }
//! ```

mod auth;
mod client;
mod endpoints;
mod error;
#[cfg(any(test, feature = "fake"))]
pub mod fake;
mod host;
pub mod logged;
pub mod privileges;
mod pve;
mod request;
pub mod retry;
mod router;
mod secret;
pub mod tls;
mod transport;
pub mod types;
mod wait;
pub mod zone;

pub use auth::{Credentials, TICKET_LIFETIME, TokenIdError, validate_token_id};
pub use client::{Client, ClientBuilder, HttpTransport};
pub use error::{ApiErrorKind, Error, Result, api_error};
pub use host::{DEFAULT_PORT, Host, HostError};
pub use logged::Logged;
pub use pve::Pve;
pub use request::{Endpoint, Method, Request};
pub use retry::Retry;
pub use router::{Captures, Handler, RoundReads, Router, not_routed, reply};
pub use secret::Secret;
pub use tls::{Fingerprint, FingerprintError, TlsTrust};
pub use transport::{Data, Transport};
pub use wait::{TaskWait, wait_task};
pub use zone::{Fingerprints, ZoneConfig};
