//! The events flxp sends to webhooks ([`crate::notify`]): their names, which the config's
//! `[[webhook]] events` lists are checked against, and their JSON body.

use serde::Serialize;

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

/// One event: the JSON body of a webhook request. `text` is a sentence, so that chat systems
/// that read a `text` field (Slack, Mattermost, Rocket.Chat) show it as it is.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    /// Its name ([`EVENTS`]).
    pub event: &'static str,
    /// The zone.
    pub zone: String,
    /// When, Unix seconds.
    pub time: i64,
    /// What sent it: `daemon`, `serve` or the one-off command (`balance`, `evacuate`, ...).
    pub source: String,
    /// One sentence for people.
    pub text: String,
    /// The facts, by event: `vmid`, `node`, `guests`, `reasons`, ...
    pub details: serde_json::Value,
}

impl Event {
    /// An event of `kind` in `zone`, now; the notifier fills in `source`.
    pub fn new(
        kind: &'static str,
        zone: &str,
        text: impl Into<String>,
        details: serde_json::Value,
    ) -> Self {
        Self {
            event: kind,
            zone: zone.to_owned(),
            time: flxp_engine::epoch_now(),
            source: String::new(),
            text: text.into(),
            details,
        }
    }
}
