//! Warnings: problems in the input that do not stop a decision, returned as data.

use std::fmt;

use serde::{Serialize, Serializer};

/// One warning about the input, rendered for people (`qemu/101: unknown flxp tag ...`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Warning {
    /// What it is about (`node pve1`, `qemu/101 (web1)`), empty for the cluster as a whole.
    pub subject: String,
    /// What is wrong and what flxp does about it.
    pub message: String,
    /// What caused it, for code that acts on warnings; not part of the rendered form.
    pub kind: WarningKind,
}

/// What caused a warning, so code can filter warnings without reading their words.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum WarningKind {
    /// Any warning without a more specific kind.
    #[default]
    Other,
    /// The migration budget was spent before the plan did all it would.
    BudgetSpent,
}

impl Warning {
    /// A warning about a node.
    pub fn node(name: &str, message: impl Into<String>) -> Self {
        Self {
            subject: format!("node {name}"),
            message: message.into(),
            kind: WarningKind::Other,
        }
    }

    /// A warning about something named by the caller (`qemu/101 (web)`, `request`).
    pub fn about(subject: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            subject: subject.into(),
            message: message.into(),
            kind: WarningKind::Other,
        }
    }

    /// A warning about the cluster as a whole.
    pub fn general(message: impl Into<String>) -> Self {
        Self {
            subject: String::new(),
            message: message.into(),
            kind: WarningKind::Other,
        }
    }
}

impl Warning {
    /// The same warning, marked with what caused it.
    pub fn with_kind(self, kind: WarningKind) -> Self {
        Self { kind, ..self }
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.subject.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.subject, self.message)
        }
    }
}

impl Serialize for Warning {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kind_is_not_rendered() {
        let w = Warning::general("migration budget of 1 spent").with_kind(WarningKind::BudgetSpent);
        assert_eq!(w.kind, WarningKind::BudgetSpent);
        assert_eq!(Warning::general("x").kind, WarningKind::Other);
        assert_eq!(
            serde_json::to_string(&w).unwrap(),
            "\"migration budget of 1 spent\""
        );
    }
}
