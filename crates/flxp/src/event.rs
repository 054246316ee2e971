//! The names of the events flxp sends to webhooks ([`crate::notify`]), which the config's
//! `[[webhook]] events` lists are checked against.

/// Every event name, as `[[webhook]] events` lists them.
pub const EVENTS: &[&str] = &[
    MIGRATION_FAILED,
    EVACUATION_INCOMPLETE,
    PLAN_UNMET,
    NODE_WOKEN,
    NODE_SHUTDOWN,
    MAINTENANCE_STEP,
    LEASE_TAKEN,
    LEASE_LOST,
];

/// A migration failed (or its outcome is unknown).
pub const MIGRATION_FAILED: &str = "migration.failed";
/// An evacuation ended with running guests still on the node.
pub const EVACUATION_INCOMPLETE: &str = "evacuation.incomplete";
/// A plan cannot meet its goal: guests that must move fit nowhere, rules stay broken, or the
/// imbalance stays above the threshold with no safe move.
pub const PLAN_UNMET: &str = "plan.unmet";
/// Power saving woke a node.
pub const NODE_WOKEN: &str = "node.woken";
/// Power saving shut a node down.
pub const NODE_SHUTDOWN: &str = "node.shutdown";
/// A node entered or left maintenance, or a step of a rolling maintenance was reached.
pub const MAINTENANCE_STEP: &str = "maintenance.step";
/// This flxp took the zone's lease: it acts there now.
pub const LEASE_TAKEN: &str = "lease.taken";
/// This flxp lost the zone's lease: another one acts there now.
pub const LEASE_LOST: &str = "lease.lost";
