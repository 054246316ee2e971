//! What carrying out a plan did: `flxp balance --json` prints it as `execution`, the daemon keeps
//! it in its round report.

use std::collections::BTreeMap;

use flxp_core::balance::{Measure, Overfull, Plan};
use serde::Serialize;

/// A migration that ended with the guest on its target.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(
    feature = "graphql",
    derive(async_graphql::SimpleObject),
    graphql(name = "MigrationDone")
)]
pub struct Done {
    /// Guest id.
    pub vmid: u32,
    /// Guest name.
    pub name: String,
    /// Source node.
    pub from: String,
    /// Target node.
    pub to: String,
    /// The plan's step.
    pub step: u32,
    /// How long it took, seconds.
    pub secs: f64,
    /// Whether Proxmox HA carried it out (`hamigrate`).
    pub ha: bool,
}

/// A migration that failed; its guest was left alone for the rest of the round.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(
    feature = "graphql",
    derive(async_graphql::SimpleObject),
    graphql(name = "MigrationFailed")
)]
pub struct Failed {
    /// Guest id.
    pub vmid: u32,
    /// Guest name.
    pub name: String,
    /// Source node.
    pub from: String,
    /// Target node.
    pub to: String,
    /// The plan's step.
    pub step: u32,
    /// Proxmox's error text, or why flxp did not start it (precondition blockers, a timeout).
    pub error: String,
}

/// A planned migration dropped because it no longer held on the fresh cluster.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(
    feature = "graphql",
    derive(async_graphql::SimpleObject),
    graphql(name = "MigrationDropped")
)]
pub struct Dropped {
    /// Guest id.
    pub vmid: u32,
    /// Guest name.
    pub name: String,
    /// Source node in the plan.
    pub from: String,
    /// Target node in the plan.
    pub to: String,
    /// The plan's step.
    pub step: u32,
    /// Why, one line per problem.
    pub reasons: Vec<String>,
}

/// One replan during the round.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "graphql", derive(async_graphql::SimpleObject))]
pub struct Replan {
    /// What made the plan stale.
    pub reason: String,
    /// Migrations in the new plan.
    pub migrations: usize,
    /// The new plan's summary.
    pub summary: String,
}

/// A migration still running when flxp stopped following it (shutdown or timeout of the drain);
/// Proxmox carries it on, and its lock keeps any flxp from starting it again.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(
    feature = "graphql",
    derive(async_graphql::SimpleObject),
    graphql(name = "MigrationUnfinished")
)]
pub struct Unfinished {
    /// Guest id.
    pub vmid: u32,
    /// Source node.
    pub from: String,
    /// Target node.
    pub to: String,
}

/// What a round of carrying out a plan did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "graphql", derive(async_graphql::SimpleObject))]
pub struct ExecutionReport {
    /// Migrations done, in the order they ended.
    pub done: Vec<Done>,
    /// Migrations that failed.
    pub failed: Vec<Failed>,
    /// Migrations started whose end could not be read from Proxmox (task and cluster
    /// unreadable): neither done nor failed as far as flxp can tell.
    pub unknown: Vec<Failed>,
    /// Planned migrations dropped because the world changed.
    pub skipped: Vec<Dropped>,
    /// Replans, in order.
    pub replans: Vec<Replan>,
    /// Migrations left running when the round stopped early.
    pub unfinished: Vec<Unfinished>,
    /// Why the round stopped before its plan was done (shutdown, the cluster unreadable,
    /// too many replans), if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// Wall time of the round, seconds.
    pub secs: f64,
    /// How the two imbalances below are summed up: the plan's measure (`spread` in percentage
    /// points, `cv`, `cv-raw`).
    pub measure: Measure,
    /// The imbalance the plan promised once every migration had run: its `imbalance_after`.
    pub imbalance_planned: f64,
    /// The imbalance measured the same way on the cluster as re-read after the round: what
    /// was achieved, failed, dropped and replanned migrations included. Absent when the cluster
    /// could not be read again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub imbalance_achieved: Option<f64>,
    /// The nodes that, read again after the round, still report using more memory than they
    /// have (counted as full); absent when none does or the cluster could not be read again.
    #[serde(skip_serializing_if = "no_overfull")]
    pub overfull: Option<Vec<Overfull>>,
    /// Planned migrations never started, by vmid, and why. Not written out: each guest left
    /// running on a node being emptied says it ([`Self::outcomes`]).
    #[serde(skip)]
    #[cfg_attr(feature = "graphql", graphql(skip))]
    pub not_started: BTreeMap<u32, NotStarted>,
    /// Guests the round's latest word leaves where they are although no migration of theirs was
    /// planned in the first plan, by vmid, and why: a migration in flight it did not start and
    /// gave up waiting for, a guest a replan did not move, one that arrived too late to be
    /// planned again. Not written out: each guest left running on a node being emptied says it
    /// ([`Self::outcomes`]).
    #[serde(skip)]
    #[cfg_attr(feature = "graphql", graphql(skip))]
    pub left_alone: BTreeMap<u32, String>,
}

/// A planned migration the run never started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotStarted {
    /// The target it was planned to (the latest plan's, after replans).
    pub to: String,
    /// Why it was not started: planned again without it, the run stopped first.
    pub why: String,
}

/// Whether there is no overfull node to write.
fn no_overfull(overfull: &Option<Vec<Overfull>>) -> bool {
    overfull.as_ref().is_none_or(Vec::is_empty)
}

impl ExecutionReport {
    /// Whether every migration started ended well and the round ran to its end.
    pub fn is_clean(&self) -> bool {
        self.failed.is_empty()
            && self.unknown.is_empty()
            && self.unfinished.is_empty()
            && self.stopped.is_none()
    }

    /// What became of each guest `plan` (the plan this report carried out) moves, and of each
    /// the run tried to move, in words by vmid: the reasons a guest still on a node being emptied
    /// gives ([`flxp_core::left_running::left_running_after`]). A migration that ran names the
    /// target it was sent to (a replan may have chosen another than the plan) and how it ended;
    /// one never started says so, and why.
    pub fn outcomes(&self, plan: &Plan) -> BTreeMap<u32, String> {
        let not_started =
            |to: &str, why: &str| format!("its migration to {to} was not started: {why}");
        let mut out: BTreeMap<u32, String> = plan
            .migrations
            .iter()
            .map(|m| (m.vmid, not_started(&m.to, "see the report")))
            .collect();
        for (vmid, why) in &self.left_alone {
            out.insert(*vmid, why.clone());
        }
        for (vmid, n) in &self.not_started {
            out.insert(*vmid, not_started(&n.to, &n.why));
        }
        // The latest word on a guest wins, the most telling kind last.
        for d in &self.done {
            let what = format!("its migration to {} was done; it came back since", d.to);
            out.insert(d.vmid, what);
        }
        for d in &self.skipped {
            let what = format!(
                "its migration to {} was not started: it no longer held ({})",
                d.to,
                d.reasons.join("; ")
            );
            out.insert(d.vmid, what);
        }
        for u in &self.unfinished {
            let what = format!(
                "its migration to {} was still running when the run stopped following it \
                 (Proxmox carries it on)",
                u.to
            );
            out.insert(u.vmid, what);
        }
        for f in &self.unknown {
            let what = format!(
                "its migration to {} has an unknown outcome: {}",
                f.to, f.error
            );
            out.insert(f.vmid, what);
        }
        for f in &self.failed {
            out.insert(
                f.vmid,
                format!("its migration to {} failed: {}", f.to, f.error),
            );
        }
        out
    }

    /// One line: what was done.
    pub fn summary(&self) -> String {
        let mut parts = vec![format!("{} migration(s) done", self.done.len())];
        if !self.failed.is_empty() {
            parts.push(format!("{} failed", self.failed.len()));
        }
        if !self.unknown.is_empty() {
            parts.push(format!("{} with unknown outcome", self.unknown.len()));
        }
        if !self.skipped.is_empty() {
            parts.push(format!("{} dropped as stale", self.skipped.len()));
        }
        if !self.replans.is_empty() {
            parts.push(format!("{} replan(s)", self.replans.len()));
        }
        if !self.unfinished.is_empty() {
            parts.push(format!("{} still running", self.unfinished.len()));
        }
        let mut s = format!("{} in {:.1} s", parts.join(", "), self.secs);
        if let Some(why) = &self.stopped {
            s.push_str(&format!("; stopped early: {why}"));
        }
        s
    }
}
