//! [`ApiError`]: what a resolver answers when it cannot, with a stable [`Code`].

use std::fmt;

use async_graphql::ErrorExtensions;

use crate::config::catalog::{Catalog, NotConfigured};

/// The stable error codes of `extensions.code`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Code {
    /// No or a wrong bearer token (HTTP 401).
    Unauthenticated,
    /// The token's role does not allow this (a viewer asked to carry something out).
    Forbidden,
    /// A malformed or impossible request.
    BadInput,
    /// The zone is not configured.
    UnknownZone,
    /// A compute or storage profile is not configured.
    UnknownProfile,
    /// The image is not configured or its template is unusable.
    UnknownImage,
    /// A network is not configured.
    UnknownNetwork,
    /// The node is not in the zone.
    UnknownNode,
    /// No node can take the VM.
    NoCapacity,
    /// Proxmox refused or failed a step.
    ProxmoxError,
    /// The zone cannot be read right now.
    Unavailable,
    /// The plan was made on a cluster that has changed since (or it was carried out already).
    StalePlan,
    /// A bug or an unexpected failure (details in the log).
    Internal,
}

impl Code {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unauthenticated => "UNAUTHENTICATED",
            Self::Forbidden => "FORBIDDEN",
            Self::BadInput => "BAD_INPUT",
            Self::UnknownZone => "UNKNOWN_ZONE",
            Self::UnknownProfile => "UNKNOWN_PROFILE",
            Self::UnknownImage => "UNKNOWN_IMAGE",
            Self::UnknownNetwork => "UNKNOWN_NETWORK",
            Self::UnknownNode => "UNKNOWN_NODE",
            Self::NoCapacity => "NO_CAPACITY",
            Self::ProxmoxError => "PROXMOX_ERROR",
            Self::Unavailable => "UNAVAILABLE",
            Self::StalePlan => "STALE_PLAN",
            Self::Internal => "INTERNAL",
        }
    }

    /// The label of the `outcome` metric.
    pub fn outcome(self) -> &'static str {
        match self {
            Self::NoCapacity => "no_capacity",
            Self::ProxmoxError => "proxmox_error",
            Self::Unavailable => "unavailable",
            Self::Internal => "internal",
            Self::Forbidden => "forbidden",
            _ => "bad_input",
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error a resolver answers with.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// Its code.
    pub code: Code,
    /// The message for the user (for `Internal`: logged only; the user gets a generic one).
    pub message: String,
}

/// Longest message an answer carries: refusals quote the input they refuse, and a request may
/// carry a megabyte-long zone or node name that the answer (and the log) need not repeat.
const MAX_MESSAGE: usize = 4096;

impl ApiError {
    /// An error with a code and a message (cut after 4 KiB, saying so).
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        let message = message.into();
        let message = match flxp_core::names::cut_at(&message, MAX_MESSAGE) {
            Some(kept) => format!("{kept}… (message cut: {} bytes in all)", message.len()),
            None => message,
        };
        Self { code, message }
    }

    /// Bad input.
    pub fn bad_input(message: impl Into<String>) -> Self {
        Self::new(Code::BadInput, message)
    }

    /// An internal failure; `detail` goes to the log only.
    pub fn internal(detail: impl fmt::Display) -> Self {
        Self::new(Code::Internal, detail.to_string())
    }
}

// No `Display` for `ApiError`: async-graphql converts every `Display` type into its error, which
// would bypass the code and the logging below.
impl From<ApiError> for async_graphql::Error {
    fn from(e: ApiError) -> Self {
        let message = match e.code {
            Code::Internal => {
                let incident = incident_id();
                tracing::error!(incident = %incident, error = %e.message, "internal error");
                format!("internal error (incident {incident}); the details are in the server log")
            }
            Code::ProxmoxError | Code::Unavailable => {
                tracing::error!(code = %e.code, error = %e.message, "request failed");
                e.message
            }
            _ => {
                tracing::debug!(code = %e.code, error = %e.message, "request refused");
                e.message
            }
        };
        async_graphql::Error::new(message).extend_with(|_, ext| ext.set("code", e.code.as_str()))
    }
}

/// A short random id tying an internal error's answer to its log line.
fn incident_id() -> String {
    let mut bytes = [0u8; 6];
    use ring::rand::SecureRandom;
    if ring::rand::SystemRandom::new().fill(&mut bytes).is_err() {
        return "unknown".into();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A name the config lacks: `UNKNOWN_PROFILE`, `UNKNOWN_IMAGE` or `UNKNOWN_NETWORK`, listing
/// what is configured.
impl From<NotConfigured> for ApiError {
    fn from(e: NotConfigured) -> Self {
        let code = match e.kind {
            Catalog::Image => Code::UnknownImage,
            Catalog::Network => Code::UnknownNetwork,
            Catalog::ComputeProfile | Catalog::StorageProfile => Code::UnknownProfile,
        };
        Self::new(code, e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_quoting_a_huge_input_is_cut_and_says_so() {
        let e = ApiError::bad_input(format!("unknown zone \"{}\"", "é".repeat(450_000)));
        assert_eq!(e.code, Code::BadInput);
        assert!(e.message.len() <= MAX_MESSAGE + 64, "{}", e.message.len());
        assert!(e.message.starts_with("unknown zone \"éé"));
        assert!(
            e.message.ends_with("… (message cut: 900015 bytes in all)"),
            "{}",
            &e.message[4000..]
        );
        let short = ApiError::bad_input("unknown zone \"lab\"");
        assert_eq!(short.message, "unknown zone \"lab\"");
    }
}
