//! The Proxmox VE API as flxp speaks it: one set of serde wire types (shared with the simulator)
//! and an async client.
//!
//! - [`types`]: request and response types, lenient when reading, exact when writing.
//! - [`PveApi`]: one async method per endpoint; `Arc<dyn PveApi>` is what the engine holds.
//! - [`Client`]: `PveApi` over HTTPS with token or ticket auth, pinned or CA-verified TLS, host
//!   failover and retries that never repeat a write.
//! - [`ZoneConfig`]: one `[zones.<name>]` table of the config file; [`Client::from_zone`].
//!
//! ```no_run
//! # async fn demo() -> flxp_pve::Result<()> {
//! use flxp_pve::{Client, PveApi, ZoneConfig};
//! let zones = flxp_pve::zone::zones_from_toml(r#"
//!     [zones.lab]
//!     hosts = ["pve1.lab:8006"]
//!     token = "flxp@pve!scheduler"
//!     token-secret-env = "FLXP_LAB_TOKEN"
//! "#)?;
//! let client = Client::from_zone(&zones["lab"])?;
//! let resources = client.cluster_resources(None).await?;
//! # Ok(()) }
//! ```

mod api;
mod auth;
mod client;
mod endpoints;
mod error;
#[cfg(any(test, feature = "fake"))]
pub mod fake;
mod host;
pub mod privileges;
mod secret;
pub mod tls;
pub mod types;
mod wait;
pub mod zone;

pub use api::PveApi;
pub use auth::{Credentials, TICKET_LIFETIME, validate_token_id};
pub use client::{Client, ClientBuilder};
pub use error::{ApiErrorKind, Error, Result, api_error};
pub use host::{DEFAULT_PORT, Host};
pub use secret::Secret;
pub use tls::{Fingerprint, TlsTrust};
pub use wait::{TaskWait, wait_task};
pub use zone::{Fingerprints, ZoneConfig};
