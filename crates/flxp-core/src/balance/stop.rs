//! Why a plan stopped short: typed causes that render to the words people read.

use std::fmt;

use serde::{Serialize, Serializer};

/// Why balancing (or rule fixing) stopped while the goal is not reached; shown as one clause.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PlanStop {
    /// The migration budget left no migration for balancing after the rule fixes.
    BudgetTooSmall {
        /// The migration budget.
        budget: usize,
    },
    /// The migration budget was spent before the goal was reached.
    BudgetSpent {
        /// The migration budget.
        budget: usize,
    },
    /// Within the migration budget, balancing would gain less than the margin.
    MarginWithinBudget {
        /// The migration budget.
        budget: usize,
    },
    /// Balancing would gain less than the margin.
    Margin,
    /// No safe move lowers the imbalance at all.
    NoSafeMove {
        /// Why storage room refused the best moves, if that is what stopped it.
        storage: Vec<String>,
    },
    /// Some moves were made, but no further safe move lowers the imbalance enough.
    NoFurtherMove {
        /// Why storage room refused the best moves, if that is what stopped it.
        storage: Vec<String>,
    },
    /// Proxmox's auto-rebalance makes no move while HA guests are migrating or relocating.
    HaInMotion {
        /// The HA resources in motion (`vm:101`).
        guests: Vec<String>,
    },
    /// Nothing can move (the words say why).
    NothingCanMove {
        /// Why nothing can move.
        why: String,
    },
    /// The best single move gains less than the margin (the words name the move and its gain).
    BestMoveBelowMargin {
        /// The move, its gain and the margin.
        detail: String,
    },
    /// The best single move needs more migrations than the budget allows.
    MoveOverBudget {
        /// Migrations the move needs.
        needed: usize,
        /// The migration budget.
        budget: usize,
    },
}

impl PlanStop {
    /// Whether the cause is that no move lowers the imbalance (rather than a limit stopping it).
    pub fn is_no_move(&self) -> bool {
        matches!(self, Self::NoSafeMove { .. } | Self::NoFurtherMove { .. })
    }
}

/// `: storage room refuses the best moves (...)`, or nothing when storage room is not the cause.
fn storage_words(f: &mut fmt::Formatter<'_>, storage: &[String]) -> fmt::Result {
    if storage.is_empty() {
        return Ok(());
    }
    write!(
        f,
        ": storage room refuses the best moves ({})",
        storage.join("; ")
    )
}

impl fmt::Display for PlanStop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BudgetTooSmall { budget } => write!(
                f,
                "the migration budget of {budget} leaves too few migrations for balancing \
                 (raise --max-migrations)"
            ),
            Self::BudgetSpent { budget } => write!(
                f,
                "the migration budget of {budget} is spent (raise --max-migrations)"
            ),
            Self::MarginWithinBudget { budget } => write!(
                f,
                "within the migration budget of {budget}, balancing would gain less than the \
                 margin (raise --max-migrations)"
            ),
            Self::Margin => f.write_str("balancing would gain less than the margin"),
            Self::NoSafeMove { storage } => {
                f.write_str("no safe move lowers it")?;
                storage_words(f, storage)
            }
            Self::NoFurtherMove { storage } => {
                f.write_str("no further safe move lowers it enough")?;
                storage_words(f, storage)
            }
            Self::HaInMotion { guests } => write!(
                f,
                "{} HA guest(s) in motion ({})",
                guests.len(),
                guests.join(", ")
            ),
            Self::NothingCanMove { why } => write!(f, "nothing can move: {why}"),
            Self::BestMoveBelowMargin { detail } => f.write_str(detail),
            Self::MoveOverBudget { needed, budget } => write!(
                f,
                "the best move needs {needed} migration(s), more than the migration budget of \
                 {budget} allows (raise --max-migrations)"
            ),
        }
    }
}

impl Serialize for PlanStop {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_words_people_read() {
        assert_eq!(
            PlanStop::BudgetSpent { budget: 3 }.to_string(),
            "the migration budget of 3 is spent (raise --max-migrations)"
        );
        assert_eq!(
            PlanStop::MarginWithinBudget { budget: 2 }.to_string(),
            "within the migration budget of 2, balancing would gain less than the margin \
             (raise --max-migrations)"
        );
        assert_eq!(
            PlanStop::NoSafeMove {
                storage: vec!["a".into(), "b".into()]
            }
            .to_string(),
            "no safe move lowers it: storage room refuses the best moves (a; b)"
        );
        assert_eq!(
            serde_json::to_string(&PlanStop::HaInMotion {
                guests: vec!["vm:101".into()]
            })
            .unwrap(),
            "\"1 HA guest(s) in motion (vm:101)\""
        );
        assert!(PlanStop::NoFurtherMove { storage: vec![] }.is_no_move());
        assert!(!PlanStop::Margin.is_no_move());
    }
}
