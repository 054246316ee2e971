//! Behaviour and contract tests of the simulator through its HTTP API (in-process, no socket,
//! except where TLS or real clients are the point). One test binary, one module per feature.

// Tests may panic: a failed unwrap is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod auth;
mod clone;
mod config;
mod contract;
mod control;
mod early;
mod envelope;
mod faults;
mod ha;
mod invariant;
mod load;
mod migrate;
mod nextid;
mod power;
mod resize;
mod rrd;
mod scenario;
mod schema_check;
mod server;
mod storage;
mod support;
mod tags;
