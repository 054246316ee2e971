//! flxp-sim: a Proxmox-VE-compatible API server backed by an in-memory simulated cluster.
//!
//! A [`Scenario`] (a Contract 1 snapshot plus an optional `sim` section) becomes a running
//! [`Sim`]: nodes, guests with real configs, storages, HA and a task table, changing over
//! simulated time. [`serve`] or [`SimHandle::spawn`] put it on a socket; [`Sim::router`] gives
//! the axum router for in-process tests. The API answers as Proxmox VE does (envelope, errors,
//! auth, form quirks, tags, digests, locks, migration and clone lifecycles), and a control
//! endpoint under `/_sim` changes the world while it runs.
//!
//! ```no_run
//! # async fn demo() -> flxp_sim::Result<()> {
//! use flxp_sim::{Scenario, Sim, SimHandle};
//! let mut scenario = Scenario::demo();
//! scenario.add_token("root@pam!flxp=2f1c0e8b-8a6c-4d1e-9f9a-0b1c2d3e4f5a")?;
//! let sim = Sim::new(scenario)?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let handle = SimHandle::spawn(listener, sim, None)?;
//! println!("{}", handle.base_url());
//! handle.shutdown().await?;
//! # Ok(()) }
//! ```

mod api;
pub mod api_error;
pub mod auth;
pub mod clock;
pub mod control;
mod error;
pub mod faults;
pub mod http;
pub mod load;
pub mod scenario;
pub mod schema;
mod server;
mod sim;
pub mod tags;
pub mod tasks;
pub mod tls;
pub mod world;

pub use api_error::ApiError;
pub use error::{Error, Result};
pub use scenario::Scenario;
pub use server::{SimHandle, run, serve, serve_tls};
pub use sim::{Sim, WorldGuard};
pub use tls::TlsIdentity;
pub use tokio_rustls::TlsAcceptor;
