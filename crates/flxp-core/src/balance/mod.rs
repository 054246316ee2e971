//! Rebalancing: how balanced a cluster is, when to act, and the plan of live migrations.

pub mod measure;

pub use measure::{Metric, spread};
