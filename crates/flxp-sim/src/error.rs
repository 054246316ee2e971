//! The simulator's library error: what can go wrong before it serves (a bad scenario, a port that
//! cannot be bound, TLS set-up). Errors of the simulated API itself are [`crate::ApiError`]s.

/// What went wrong while loading a scenario or starting the server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The scenario file could not be read.
    #[error("cannot read {path}")]
    ReadScenario {
        /// The file's path.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The scenario is not valid JSON or breaks a rule; `path` names the offending entry.
    #[error("invalid scenario{}: {message}", if path.is_empty() { String::new() } else { format!(" at {path}") })]
    Scenario {
        /// JSON path of the offending field or entry (`sim.tokens[0]`, `resources[3]`).
        path: String,
        /// What is wrong there.
        message: String,
    },
    /// A trace (usage models and workload events) is not valid JSON or breaks a rule; `path`
    /// names the offending field (`events[3].create.cores`).
    #[error("invalid trace{}: {message}", if path.is_empty() { String::new() } else { format!(" at {path}") })]
    Trace {
        /// JSON path of the offending field.
        path: String,
        /// What is wrong there.
        message: String,
    },
    /// An API token given on the command line or in the scenario is malformed.
    #[error("invalid API token {token}: {message}")]
    Token {
        /// The token id (never the secret).
        token: String,
        /// What is wrong with it.
        message: String,
    },
    /// The self-signed certificate could not be generated or loaded.
    #[error("TLS set-up failed: {0}")]
    Tls(String),
    /// The API schema built into the simulator cannot be read: a defect of the build, not of
    /// the scenario. Without it requests would go unvalidated, so no simulator starts.
    #[error("the embedded Proxmox API schema is unreadable: {0}")]
    Schema(String),
    /// The server's socket failed.
    #[error("server I/O failed: {0}")]
    Io(#[from] std::io::Error),
}

impl Error {
    /// A scenario error at `path`.
    pub(crate) fn scenario(path: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Scenario {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// Result with the simulator's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
