//! The engine's error type for planning and carrying out plans.
//!
//! A failed migration is not an error: it is part of the [`crate::ExecutionReport`]. Errors are
//! what stops a round before or while it runs: the cluster cannot be read, the snapshot cannot be
//! meant, a named node or zone does not exist, or the core refuses its options.

use crate::collect::CollectError;

/// Why a plan could not be made or a round could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The cluster could not be read.
    #[error(transparent)]
    Collect(#[from] CollectError),
    /// The snapshot could not be turned into a cluster model.
    #[error("the cluster snapshot cannot be used")]
    Model {
        /// What the core found wrong (an entry, a duplicate vmid).
        #[source]
        source: flxp_core::Error,
    },
    /// The core refused to plan (bad options or a scorer bug).
    #[error("planning failed")]
    Plan {
        /// The core's reason, naming the option.
        #[source]
        source: flxp_core::Error,
    },
    /// A node named for evacuation is not in the cluster.
    #[error("node {node:?} is not in the cluster; nodes: {known}")]
    UnknownNode {
        /// The name given.
        node: String,
        /// The cluster's nodes, comma-separated.
        known: String,
    },
    /// The zone's lease lapsed while the round planned: another flxp may act there now.
    #[error("the lease of zone {zone} lapsed before the plan was carried out; nothing started")]
    LeaseLost {
        /// The zone.
        zone: String,
    },
    /// A zone that this daemon does not manage.
    #[error("zone {zone:?} is not managed here; zones: {known}")]
    UnknownZone {
        /// The name given.
        zone: String,
        /// The managed zones, comma-separated.
        known: String,
    },
    /// Work handed to the blocking pool (see [`crate::blocking`]) did not come back: it panicked
    /// (a bug) or the runtime is shutting down.
    #[error("{what} did not finish: {reason}")]
    Interrupted {
        /// The work, e.g. `planning`.
        what: &'static str,
        /// Why.
        reason: String,
    },
    /// Where evacuated guests come from could not be read from the node's notes.
    #[error("cannot read where the guests come from: {reason}")]
    Home {
        /// Why, with the causes.
        reason: String,
    },
}

/// Result with the engine's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
