//! What can go wrong in the CRS math: bad numbers in, named by the node, resource or criterion.
//!
//! Kept separate from [`crate::Error`] because this module must stay usable on its own; the crate
//! error can wrap it (`#[from]`).

/// Bad input to the CRS math, naming the culprit.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CrsError {
    /// A node's stats cannot be scored (zero capacity, a negative or non-finite number, a duplicate).
    #[error("node {node}: {message}")]
    Node {
        /// The node's name.
        node: String,
        /// What is wrong with it.
        message: String,
    },
    /// A resource's stats or location are unusable (non-finite, unknown node, duplicate id).
    #[error("resource {resource}: {message}")]
    Resource {
        /// The resource's id (`vm:101`), as the caller named it.
        resource: String,
        /// What is wrong with it.
        message: String,
    },
    /// A migration candidate names unknown nodes or moves nowhere.
    #[error("migration candidate {sid} from {source_node} to {target}: {message}")]
    Candidate {
        /// The leading resource's id.
        sid: String,
        /// The node it leaves.
        source_node: String,
        /// The node it would go to.
        target: String,
        /// What is wrong with it.
        message: String,
    },
    /// A TOPSIS criterion's weight is not a finite number.
    #[error("TOPSIS criterion '{criterion}' has invalid weight {weight}")]
    Weight {
        /// The criterion's name.
        criterion: String,
        /// The offending weight.
        weight: f64,
    },
    /// Every TOPSIS criterion has weight zero, so nothing can be ranked.
    #[error("no TOPSIS criterion has a non-zero weight")]
    ZeroWeights,
    /// A TOPSIS matrix entry is not finite (or its column cannot be normalised).
    #[error("TOPSIS alternative {alternative}, criterion '{criterion}': invalid value {value}")]
    Value {
        /// Row of the matrix (0-based).
        alternative: usize,
        /// The criterion's name.
        criterion: String,
        /// The offending value.
        value: f64,
    },
    /// A TOPSIS score came out non-finite.
    #[error("TOPSIS alternative {alternative}: invalid score {score}")]
    Score {
        /// Row of the matrix (0-based).
        alternative: usize,
        /// The offending score.
        score: f64,
    },
    /// A load handed to the imbalance metric is negative or not finite.
    #[error("load #{index} is {load}, expected a finite number >= 0")]
    Load {
        /// Position of the load in the input.
        index: usize,
        /// The offending load.
        load: f64,
    },
}

/// Result with the CRS error.
pub type CrsResult<T> = std::result::Result<T, CrsError>;
