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

/// Warnings of one kind about one subject, of which only the first few are listed: input from
/// outside (tags, notes, HA rule lists) may hold millions of bad items, and one line each would
/// bury everything else.
#[derive(Debug)]
pub(crate) struct CappedWarnings {
    subject: String,
    listed: Vec<Warning>,
    more: usize,
}

impl CappedWarnings {
    /// How many warnings are listed before the rest are summed up in one line.
    pub const LISTED: usize = 10;

    /// An empty list about `subject`.
    pub fn new(subject: impl Into<String>) -> Self {
        Self {
            subject: subject.into(),
            listed: Vec::new(),
            more: 0,
        }
    }

    /// Adds a warning about the subject; past [`Self::LISTED`] it is only counted.
    pub fn push(&mut self, message: impl Into<String>) {
        if self.listed.len() < Self::LISTED {
            self.listed
                .push(Warning::about(self.subject.clone(), message));
        } else {
            self.more += 1;
        }
    }

    /// The listed warnings, then one that counts the rest (`what` names them and what was done).
    pub fn finish(self, what: &str, into: &mut Vec<Warning>) {
        into.extend(self.listed);
        if self.more > 0 {
            into.push(Warning::about(
                self.subject,
                format!("{} more {what} (not listed)", self.more),
            ));
        }
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

    #[test]
    fn capped_warnings_list_the_first_ten_and_count_the_rest() {
        let mut c = CappedWarnings::new("qemu/101");
        for i in 0..25 {
            c.push(format!("bad {i}"));
        }
        let mut out = Vec::new();
        c.finish("bad things", &mut out);
        assert_eq!(out.len(), 11);
        assert_eq!(out[9].to_string(), "qemu/101: bad 9");
        assert_eq!(
            out[10].to_string(),
            "qemu/101: 15 more bad things (not listed)"
        );
    }
}
