//! Consolidation carried out: plan it with the core on the zone as read now, run its migrations
//! as an evacuation of the freed nodes (the executor re-checks every step and replans as an
//! evacuation of the same nodes), and switch emptied nodes off or wake them through the API.
//!
//! A node is switched off only when a fresh read shows it empty (no guest on it, none migrating
//! onto it or possibly landing there) and in maintenance, and only if
//! more than half of all the cluster's nodes stay online without it (a switched-off node still
//! counts as an expected vote, so quorum needs that majority).

use std::sync::Arc;

use flxp_core::balance::{BalanceOptions, EvacuateOptions};
use flxp_core::cluster::NodeIdx;
use flxp_core::consolidate::{ConsolidateOptions, Consolidation, Judged, consolidate};
use flxp_core::placement::Placer;
use flxp_pve::types::NodeCommand;

use crate::error::{Error, Result};
use crate::execute::{Executor, error_chain};
use crate::maintenance::{self, MarkError};
use crate::planning::{Goal, Model};
use crate::power_mark::{self, PowerMark, PowerMarkError, PowerState};

/// Why an emptied node was not switched off.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PowerError {
    /// The cluster could not be read to check the node first.
    #[error("cannot read the cluster to check node {node}: {reason}")]
    Unreadable {
        /// The node.
        node: String,
        /// The read error, with its causes.
        reason: String,
    },
    /// The node is not (or no longer) safe to switch off.
    #[error("node {node} is not switched off: {reason}")]
    Refused {
        /// The node.
        node: String,
        /// Why not.
        reason: String,
    },
    /// The node was switched off, but a guest began migrating onto it between flxp's last
    /// check and the shutdown (started by hand or by another tool): Proxmox stops that
    /// migration and the guest stays on its source.
    #[error(
        "node {node} was switched off, but {reason} (the migration began after flxp's last \
         check: Proxmox stops it and the guest stays where it was; start it again once the \
         node is back or choose another target)"
    )]
    Raced {
        /// The node.
        node: String,
        /// What was landing on it, as [`occupied`] says it.
        reason: String,
    },
    /// Proxmox refused the call.
    #[error("node {node}: {action} failed")]
    Api {
        /// The node.
        node: String,
        /// `shutdown` or `Wake-on-LAN`.
        action: &'static str,
        /// Proxmox's answer.
        #[source]
        source: flxp_pve::Error,
    },
    /// The power mark could not be written or removed.
    #[error(transparent)]
    Mark(#[from] PowerMarkError),
    /// The maintenance mark could not be written or removed.
    #[error(transparent)]
    Maintenance(#[from] MarkError),
}

/// Plans a consolidation of `model` on a blocking thread: the outer error is the thread's, the
/// inner the planner's.
pub(crate) async fn plan_on_blocking_thread(
    model: Arc<Model>,
    placer: Arc<Placer>,
    options: ConsolidateOptions,
    evacuate: EvacuateOptions,
    judged: Option<TellJudged>,
) -> Result<flxp_core::Result<Consolidation>> {
    crate::blocking::run("planning a consolidation", move || {
        consolidate(
            &model.cluster,
            &model.rules,
            &model.state,
            &placer,
            &options,
            &evacuate,
            &|j| {
                if let Some(tell) = &judged {
                    tell(j);
                }
            },
        )
    })
    .await
}

/// Where a consolidation planned on a blocking thread tells of each node judged.
pub type TellJudged = Arc<dyn for<'a> Fn(Judged<'a>) + Send + Sync>;

impl Executor {
    /// Reads the zone and plans a consolidation on it (the executor's placer: its reserves
    /// count for the headroom). Nodes an earlier consolidation marked `off` and left online in
    /// maintenance (an interrupted run) are freed first: the plan finishes them. The
    /// executor's kept nodes ([`Executor::with_kept_nodes`]) are never freed.
    pub async fn plan_consolidation(
        &self,
        options: &ConsolidateOptions,
        evacuate: &EvacuateOptions,
    ) -> Result<Consolidation> {
        self.plan_consolidation_telling(options, evacuate, None)
            .await
    }

    /// [`Executor::plan_consolidation`], telling `judged` of each node as it is judged (a
    /// progress line on a large zone).
    pub async fn plan_consolidation_telling(
        &self,
        options: &ConsolidateOptions,
        evacuate: &EvacuateOptions,
        judged: Option<TellJudged>,
    ) -> Result<Consolidation> {
        let (model, notes) = self.read_with_notes().await?;
        let options = self.consolidation_options(options, &power_mark::read(&notes));
        plan_on_blocking_thread(
            Arc::new(model),
            Arc::clone(&self.placer),
            options,
            evacuate.clone(),
            judged,
        )
        .await?
        .map_err(|source| Error::Plan { source })
    }

    /// `options` as this executor carries a consolidation out: its kept nodes are never freed,
    /// and the nodes `marks` say are `off` (left by an interrupted run) are freed first.
    pub(crate) fn consolidation_options(
        &self,
        options: &ConsolidateOptions,
        marks: &[PowerMark],
    ) -> ConsolidateOptions {
        let mut options = options.clone();
        options
            .keep
            .extend(self.kept.iter().map(|(n, why)| (n.clone(), why.clone())));
        options.resume = marks
            .iter()
            .filter(|m| m.state == PowerState::Off)
            .map(|m| m.node.clone())
            .collect();
        options
    }

    /// Switches a node off (`POST /nodes/{node}/status`, `shutdown`) after checking on a fresh
    /// read that it holds no guest and none is migrating onto it ([`occupied`]), that it is in
    /// maintenance, and that more than half of all nodes stay online without it. A read after
    /// the call tells whether a migration onto it began in between ([`PowerError::Raced`]): the
    /// node is off then, and the caller reports the guest instead of a clean shutdown.
    pub async fn shut_down_if_empty(&self, node: &str) -> std::result::Result<(), PowerError> {
        let model = self.read().await.map_err(|e| PowerError::Unreadable {
            node: node.to_owned(),
            reason: error_chain(&e),
        })?;
        let refuse = |reason: String| PowerError::Refused {
            node: node.to_owned(),
            reason,
        };
        flxp_core::consolidate::power::may_switch_off(&model.cluster, &model.state, node)
            .map_err(refuse)?;
        self.api()
            .node_command(node, NodeCommand::Shutdown)
            .await
            .map_err(|source| PowerError::Api {
                node: node.to_owned(),
                action: "shutdown",
                source,
            })?;
        tracing::info!(zone = self.zone(), node, "node switched off");
        // Nothing stops an admin from starting a migration onto the node between the check and
        // the call; Proxmox then stops it with the node. Say so rather than a clean shutdown.
        match self.read().await {
            Ok(after) => {
                if let Some(idx) = after.cluster.node_idx(node) {
                    if let Some(reason) = occupied(&after, idx) {
                        tracing::warn!(zone = self.zone(), node, %reason, "a migration onto a node switched off");
                        return Err(PowerError::Raced {
                            node: node.to_owned(),
                            reason,
                        });
                    }
                }
            }
            Err(e) => {
                tracing::warn!(zone = self.zone(), node, error = %error_chain(&e), "cannot read the cluster after the shutdown");
            }
        }
        Ok(())
    }

    /// Marks the nodes a consolidation frees before any guest moves: the power mark (`off`, in
    /// the notes of a node that stays in service) and then the maintenance mark, so that an
    /// interrupted run is finished by the next one. Marks held by a node being freed move to the
    /// new holder first (its notes are out of reach once it is off).
    pub async fn mark_freed(
        &self,
        c: &Consolidation,
        now: i64,
    ) -> std::result::Result<(), PowerError> {
        let freed = c.freed_names();
        let Some(holder) = c
            .kept
            .iter()
            .find(|k| k.because != flxp_core::consolidate::KeptBecause::NotCandidate)
            .map(|k| k.node.clone())
        else {
            return Err(PowerError::Refused {
                node: freed.join(", "),
                reason: "no node stays in service to keep the power mark".into(),
            });
        };
        let (_, notes) = self
            .read_with_notes()
            .await
            .map_err(|e| PowerError::Unreadable {
                node: freed.join(", "),
                reason: error_chain(&e),
            })?;
        for m in power_mark::read(&notes) {
            if freed.contains(&m.holder) && !freed.contains(&m.node) {
                power_mark::set(self.api(), &holder, &m.node, Some((m.state, m.since))).await?;
                power_mark::set(self.api(), &m.holder, &m.node, None).await?;
            }
        }
        // Nodes resumed from an earlier run keep their mark (and its time).
        for f in c.freed.iter().filter(|f| !f.resumed) {
            power_mark::set(self.api(), &holder, &f.node, Some((PowerState::Off, now))).await?;
            maintenance::set(self.api(), &f.node, true).await?;
        }
        Ok(())
    }

    /// A node's power marks, wherever they are kept (read fresh: marks move between nodes).
    async fn power_marks_of(
        &self,
        node: &str,
    ) -> std::result::Result<Vec<power_mark::PowerMark>, PowerError> {
        let (_, notes) = self
            .read_with_notes()
            .await
            .map_err(|e| PowerError::Unreadable {
                node: node.to_owned(),
                reason: error_chain(&e),
            })?;
        let mut marks = power_mark::read(&notes);
        marks.retain(|m| m.node == node);
        Ok(marks)
    }

    /// Removes a node's power mark wherever it is (the node is back in service); `Ok(false)`
    /// when it had none.
    pub async fn clear_power_mark(&self, node: &str) -> std::result::Result<bool, PowerError> {
        let mut found = false;
        for m in self.power_marks_of(node).await? {
            power_mark::set(self.api(), &m.holder, node, None).await?;
            found = true;
        }
        Ok(found)
    }

    /// Dates a node's power mark `now` wherever it is, keeping its state (a node just switched
    /// off: the interval before a wake runs from here); `Ok(false)` when it had none.
    pub async fn stamp_power_mark(
        &self,
        node: &str,
        now: i64,
    ) -> std::result::Result<bool, PowerError> {
        self.rewrite_power_mark(node, None, now).await
    }

    /// Marks a node `waking` since `now` wherever its power mark is, before a Wake-on-LAN: a
    /// node that boots after the waiter gave up is then put back in service (by the daemon or
    /// the next `--wake`), never taken for an unfinished consolidation; `Ok(false)` when it had
    /// no mark.
    pub async fn mark_waking(&self, node: &str, now: i64) -> std::result::Result<bool, PowerError> {
        self.rewrite_power_mark(node, Some(PowerState::Waking), now)
            .await
    }

    /// Rewrites a node's power mark wherever it is, dated `now`, in `state` (`None`: its own).
    async fn rewrite_power_mark(
        &self,
        node: &str,
        state: Option<PowerState>,
        now: i64,
    ) -> std::result::Result<bool, PowerError> {
        let mut found = false;
        for m in self.power_marks_of(node).await? {
            let state = state.unwrap_or(m.state);
            power_mark::set(self.api(), &m.holder, node, Some((state, now))).await?;
            found = true;
        }
        Ok(found)
    }

    /// Sends a Wake-on-LAN packet for a node (`POST /nodes/{node}/wakeonlan`); its MAC address.
    pub async fn wake(&self, node: &str) -> std::result::Result<String, PowerError> {
        let mac = self
            .api()
            .wake_on_lan(node)
            .await
            .map_err(|source| PowerError::Api {
                node: node.to_owned(),
                action: "Wake-on-LAN",
                source,
            })?;
        tracing::info!(zone = self.zone(), node, %mac, "node woken");
        Ok(mac)
    }
}

/// Why node `idx` of `model` is not empty: a guest on it (any state, one migrating off it
/// included), a guest migrating onto it, or a migration whose target flxp cannot tell (it may
/// land on it); `None` when nothing is on it or on its way. A guest migrating is on its source
/// until it lands, so a node switched off while one lands on it stops that guest.
pub fn occupied(model: &Model, idx: NodeIdx) -> Option<String> {
    flxp_core::consolidate::power::occupied(&model.cluster, &model.state, idx)
}

/// The goal the consolidation's migrations run under: evacuating the nodes it frees (replans
/// empty the same nodes).
pub fn goal(consolidation: &Consolidation, evacuate: &EvacuateOptions) -> Goal {
    Goal::Evacuate {
        nodes: consolidation.freed_names(),
        options: EvacuateOptions {
            include_stopped: true,
            ..evacuate.clone()
        },
    }
}

/// The goal of the rebalance that follows a wake: the balance options without the per-guest
/// cooldown.
///
/// The consolidation moved most guests shortly before, so the cooldown would keep the woken node
/// empty until those moves age out; an admin (or the load that woke it) wants it to take load at
/// once. The plan is still bounded by the usual budget, and the power hysteresis
/// (`min-interval-secs`, the two load levels) is unchanged: this is one rebalance per wake.
pub fn after_wake(balance: &BalanceOptions) -> Goal {
    Goal::Balance(BalanceOptions {
        cooldown_secs: 0,
        ..balance.clone()
    })
}
