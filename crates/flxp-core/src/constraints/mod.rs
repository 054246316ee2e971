//! Contract 2: constraints from flxp tags, node notes, ProxLB tags and Proxmox HA rules, compiled
//! into one set of rules per snapshot.
//!
//! `Rules::compile` reads every guest's tags and every HA rule once, builds the groups index, and
//! reports malformed tokens as warnings and rules that cannot all hold as conflicts. Placement and
//! planning only ever look at the compiled form.

mod breaches;
mod conflicts;
mod ha;
pub mod notes;
mod rules;
pub mod tags;
mod violations;

pub use breaches::{Breach, breaches, breaches_among};
pub(crate) use breaches::{crowded_reason, split_reason};
pub use conflicts::Conflict;
pub use rules::{Group, GroupId, GroupKind, GuestRules, NodeRule, Preference, Rules};
pub use violations::{Violation, violations};
