//! flxp's orchestration: collect a cluster snapshot from the Proxmox API, decide with the pure
//! core, carry out the decision.
//!
//! - [`collect_snapshot`]: Contract 1 from a live API in O(nodes) calls.

pub mod collect;

pub use collect::{CollectError, collect_snapshot};
