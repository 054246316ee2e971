//! [`UsageError`]: what the user typed is wrong.

/// An error in what the user typed, found after parsing (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

impl From<crate::config::UnknownZone> for UsageError {
    fn from(e: crate::config::UnknownZone) -> Self {
        Self(e.to_string())
    }
}
