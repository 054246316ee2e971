//! Contract 2: constraints from flxp tags, node notes, ProxLB tags and Proxmox HA rules, compiled
//! into one set of rules per snapshot.
//!
//! `Rules::compile` reads every guest's tags and every HA rule once, builds the groups index, and
//! reports malformed tokens as warnings and rules that cannot all hold as conflicts. Placement and
//! planning only ever look at the compiled form.

mod breaches;
mod compile;
mod conflicts;
mod ha;
mod rules;
mod violations;

pub use crate::cluster::{notes, tags};
pub use breaches::{Breach, breaches, breaches_among};
pub(crate) use breaches::{allows_only, crowded_reason, split_reason};
// Shown by balance explanations too; their tests check it.
#[cfg(test)]
pub(crate) use breaches::placement_list;
pub use rules::{Conflict, Group, GroupId, GroupKind, GuestRules, NodeRule, Preference, Rules};
pub use violations::{Violation, violations};
