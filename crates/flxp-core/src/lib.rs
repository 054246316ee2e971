//! flxp's pure scheduling core.
//!
//! Everything here is a function of a cluster snapshot plus a request plus options: no I/O, no
//! clock, no randomness. The main types:
//!
//! - [`Snapshot`]: Contract 1, read in every accepted form ([`Snapshot::from_json`]).
//! - [`Cluster`]: the typed model with its indexes, built once per snapshot.
//! - [`Rules`]: Contract 2's constraints compiled from tags, node notes, ProxLB tags and HA rules.
//! - [`State`]: node usage and guest locations, the state decisions are made on.
//!
//! ```
//! use flxp_core::{Cluster, Overrides, Rules};
//! let cluster = Cluster::from_json(
//!     r#"[{"id":"node/pve1","type":"node","node":"pve1","status":"online","maxmem":68719476736}]"#,
//!     &Overrides::default(),
//! ).unwrap();
//! let rules = Rules::compile(&cluster);
//! assert!(rules.conflicts.is_empty());
//! ```

pub mod balance;
pub mod builder;
pub mod cluster;
pub mod consolidate;
pub mod constraints;
mod error;
pub mod evacuate;
#[cfg(feature = "graphql")]
mod graphql;
pub mod left_running;
pub mod lenient;
pub mod model;
pub mod names;
pub mod placement;
pub mod plugin;
pub mod pve_crs;
pub mod return_home;
pub mod scheduler;
pub mod snapshot;
pub mod state;
pub mod status;
pub mod units;
mod warning;

pub use cluster::{Cluster, Overrides};
pub use constraints::Rules;
pub use error::{Error, Result};
pub use model::Model;
pub use scheduler::Scheduler;
pub use snapshot::Snapshot;
pub use state::State;
pub use warning::{Warning, WarningKind};

#[cfg(test)]
mod testutil;
