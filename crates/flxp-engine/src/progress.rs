//! Progress events of a round, for whoever shows them (progress bars, the dashboard, logs).
//!
//! The executor calls [`Progress::event`] as migrations start, advance, end and as plans change.
//! Implementations must return quickly: they run on the executor's task. The engine logs with
//! `tracing` on its own; events are for user interfaces.

use flxp_core::units::{GIB, KIB, MIB, TIB};
use serde::Serialize;

/// One thing that happened while carrying out a plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Event {
    /// A migration was started.
    Started {
        /// Zone name.
        zone: String,
        /// Guest id.
        vmid: u32,
        /// Guest name.
        name: String,
        /// Source node.
        from: String,
        /// Target node.
        to: String,
        /// The plan's step it belongs to.
        step: u32,
        /// Live migration of a running guest (or a container restart); `false` is offline.
        online: bool,
        /// Memory expected to be copied, bytes.
        bytes: u64,
    },
    /// A running migration advanced.
    Progress {
        /// Zone name.
        zone: String,
        /// Guest id.
        vmid: u32,
        /// 0..=1: from the task log's "transferred X of Y" when it has one, else elapsed over
        /// expected time (never 1 before the end).
        fraction: f64,
    },
    /// A migration ended well: the guest is on its target.
    Done {
        /// Zone name.
        zone: String,
        /// Guest id.
        vmid: u32,
        /// Source node.
        from: String,
        /// Target node.
        to: String,
        /// How long it took, seconds.
        secs: f64,
    },
    /// A migration failed; the guest is left alone for the rest of the round.
    Failed {
        /// Zone name.
        zone: String,
        /// Guest id.
        vmid: u32,
        /// Source node.
        from: String,
        /// Target node.
        to: String,
        /// Proxmox's error text (or why flxp did not start it).
        error: String,
    },
    /// A planned migration no longer holds on the fresh cluster and was dropped.
    Skipped {
        /// Zone name.
        zone: String,
        /// Guest id.
        vmid: u32,
        /// Why, one line per problem.
        reason: String,
    },
    /// The rest of the round was planned anew on the fresh cluster.
    Replanned {
        /// Zone name.
        zone: String,
        /// What made the old plan stale.
        reason: String,
        /// Migrations in the new plan.
        migrations: usize,
    },
}

/// Receives progress events.
pub trait Progress: Send + Sync {
    /// Called for each event, on the executor's task: return quickly.
    fn event(&self, event: &Event);

    /// Whether `Progress` fractions are wanted: they cost a task-log read per poll.
    fn wants_fractions(&self) -> bool {
        true
    }
}

/// Drops every event.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn event(&self, _event: &Event) {}

    fn wants_fractions(&self) -> bool {
        false
    }
}

/// Sends every event into a channel (the receiver may be gone: events are then dropped).
impl Progress for tokio::sync::mpsc::UnboundedSender<Event> {
    fn event(&self, event: &Event) {
        let _ = self.send(event.clone());
    }
}

/// Fraction of a live migration from a task log line such as Proxmox's
/// `migration active, transferred 1.6 GiB of 8.0 GiB VM-state, 1.0 GiB/s`.
pub fn fraction_from_log(line: &str) -> Option<f64> {
    let rest = &line[line.find("transferred ")? + "transferred ".len()..];
    let (done, rest) = rest.split_once(" of ")?;
    let total = rest.split(" VM-state").next()?;
    let (done, total) = (parse_size(done)?, parse_size(total)?);
    (total > 0.0).then(|| (done / total).clamp(0.0, 1.0))
}

/// `1.6 GiB`, `512.0 MiB`, `1234 B`, `2.0 KiB` in bytes (Proxmox's `render_bytes` units).
fn parse_size(text: &str) -> Option<f64> {
    let (num, unit) = text.trim().split_once(' ')?;
    let v: f64 = num.parse().ok()?;
    let scale = match unit.trim() {
        "B" | "b" => 1.0,
        "KiB" => KIB as f64,
        "MiB" => MIB as f64,
        "GiB" => GIB as f64,
        "TiB" => TIB as f64,
        _ => return None,
    };
    Some(v * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_transferred_share_is_read_from_proxmox_log_lines() {
        let line = "2025-11-29 12:00:03 migration active, transferred 1.6 GiB of 8.0 GiB VM-state, 1.0 GiB/s";
        assert_eq!(fraction_from_log(line), Some(0.2));
        assert_eq!(
            fraction_from_log(
                "migration active, transferred 512.0 MiB of 2.0 GiB VM-state, 1.0 GiB/s"
            ),
            Some(0.25)
        );
        assert_eq!(fraction_from_log("starting online/live migration"), None);
        assert_eq!(
            fraction_from_log("migration active, transferred 1 GiB of 0 B VM-state"),
            None
        );
        assert_eq!(
            fraction_from_log("transferred lots of bytes VM-state"),
            None
        );
    }

    #[test]
    fn events_serialize_with_their_kind() {
        let e = Event::Skipped {
            zone: "lab".into(),
            vmid: 101,
            reason: "guest 101 is on pve2, not on pve1".into(),
        };
        assert_eq!(
            serde_json::to_string(&e).unwrap_or_default(),
            r#"{"event":"skipped","zone":"lab","vmid":101,"reason":"guest 101 is on pve2, not on pve1"}"#
        );
    }
}
