//! The Proxmox VE API as flxp speaks it: one set of serde wire types (shared with the simulator)
//! and an async client.

mod secret;
pub mod types;

pub use secret::Secret;
