//! Engine tests against the simulator (`flxp_sim`) in-process on `127.0.0.1:0`.
// Tests may panic: a failed unwrap is the failure report.
#![allow(clippy::unwrap_used)]

mod collect;
mod daemon;
mod economy;
mod execute;
mod inflight;
mod lease;
mod plugin_zone;
mod power;
mod sim_client;
mod smoothing;
mod support;
