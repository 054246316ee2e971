//! The core's one error type: bad input, named by where it is.
//!
//! "No node fits" and "no safe plan" are decisions, not errors: they come back as data with reasons.

/// What went wrong while reading input into the core.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The snapshot document is not valid JSON or does not have the shape of Contract 1.
    #[error("invalid snapshot{}: {message}", if path.is_empty() { String::new() } else { format!(" at {path}") })]
    Snapshot {
        /// JSON path of the offending value (`resources[3].maxmem`), empty for the whole document.
        path: String,
        /// What is wrong there.
        message: String,
    },
    /// A resource entry is unusable (a guest without a vmid, a node without a name, a duplicate).
    #[error("invalid resource {entry}: {message}")]
    Resource {
        /// The entry's `id`, or its index when it has none.
        entry: String,
        /// What is wrong with it.
        message: String,
    },
    /// A placement request is unusable (zero memory, zero cores, a malformed tag).
    #[error("invalid request: {0}")]
    Request(String),
    /// A request names a host that is not a node of the cluster.
    #[error("host {host:?} is not a node of the cluster (nodes: {nodes})")]
    UnknownHost {
        /// The name asked for.
        host: String,
        /// The cluster's nodes, comma-separated.
        nodes: String,
    },
    /// An option is out of range or names something unknown (a policy, a scorer).
    #[error("invalid option {name}: {message}")]
    Option {
        /// The option's name, as the user writes it.
        name: String,
        /// What is wrong with it.
        message: String,
    },
    /// A scorer returned a score outside 0..=100 after normalisation: a bug in that scorer.
    #[error("scorer {scorer} returned {value} for node {node}, outside 0..=100")]
    ScoreOutOfRange {
        /// The scorer's name.
        scorer: &'static str,
        /// The node it scored.
        node: String,
        /// The offending score.
        value: f64,
    },
    /// A plugin with `on-failure = "fail"` failed: the decision is refused with its error.
    #[error("plugin {plugin}: {message}")]
    Plugin {
        /// The plugin's name.
        plugin: String,
        /// What went wrong (timeout, crash, a bad answer).
        message: String,
    },
    /// Proxmox's scheduler math refused its input (a node without capacity, a non-finite figure).
    // Not a `#[source]`: the message already holds it, and a chain printer (`{:#}`) would repeat it.
    #[error("Proxmox scheduler math: {0}")]
    Crs(crate::pve_crs::CrsError),
}

impl From<crate::pve_crs::CrsError> for Error {
    fn from(e: crate::pve_crs::CrsError) -> Self {
        Self::Crs(e)
    }
}

/// Result with the core's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pve_crs::CrsError;

    #[test]
    fn a_crs_error_is_said_once_even_by_a_chain_printer() {
        let e = Error::from(CrsError::Node {
            node: "a".into(),
            message: "cpu is inf".into(),
        });
        assert_eq!(e.to_string(), "Proxmox scheduler math: node a: cpu is inf");
        // `{:#}` printers append every source; the message already holds this one.
        assert!(std::error::Error::source(&e).is_none());
    }
}
