//! Rolling maintenance: nodes taken through maintenance one at a time (or a few, see [`wave`]) —
//! evacuate, an optional admin hook, an optional reboot through the API, back online and
//! quorate, maintenance cleared, guests back home — stopping at the first failure.
//!
//! Progress is kept in Proxmox, never in memory, so that a rerun (after a failure fixed, or a
//! `kill -9`) continues where the last run stopped: one HTML comment line per node,
//! `<!-- flxp-rolling node=<node> step=<step> boot=<epoch secs> [error=<reason>] -->`, in the
//! notes of another node (the first by name that is not out with it), so it stays readable
//! while its node reboots. Each line is written before its step acts; a step that failed adds
//! its reason (percent-encoded), which the next run clears as it continues, so that whoever
//! reads the progress (the dashboard after a reload, another flxp) sees why it stopped. A node
//! whose line says `done` is skipped; nodes with any other step are the ones out, and are
//! finished first. The lines go when every node of the run is done.
//!
//! One node is out at a time, or up to [`RollingOptions::parallel`] in a wave; before one goes,
//! every other node (but those of its wave) must be online, more than half of all nodes must
//! stay online without the wave (quorum), and its guests must fit on the others with every hard
//! rule kept. Within a wave, emptying nodes and taking guests home run one node at a time (each
//! plan sees the moves before it); hooks, reboots and the waits for them run side by side. A
//! failure in a wave lets the wave's other nodes finish, then stops the run.

mod schedule;
pub mod wave;
pub use schedule::{Planned, Schedule, ScheduledNode, TellPlanned};

use std::collections::BTreeMap;
use std::time::Duration;

use flxp_core::balance::EvacuateOptions;
use flxp_core::left_running::left_running_after;
use flxp_pve::types::{NodeCommand, ResourceType};

use crate::execute::{Executor, error_chain};
use crate::maintenance;
use crate::planning::Goal;

/// The start of a progress line.
const PREFIX: &str = "<!-- flxp-rolling ";

/// Where a node is in its maintenance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    /// Homes recorded and maintenance marked: being emptied.
    Evacuating,
    /// Empty: the admin's hook runs (a rerun runs it again).
    Hook,
    /// Empty, hook done: to be rebooted.
    Hooked,
    /// About to ask for the reboot; `boot` holds the boot time before it.
    Rebooting,
    /// Reboot accepted: waiting for the node to be back online and the cluster quorate; `boot`
    /// holds the boot time before the reboot.
    Waiting,
    /// Back (or not rebooted): maintenance cleared, guests going home.
    Returning,
    /// Done.
    Done,
}

impl Step {
    /// The word in the progress line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Evacuating => "evacuating",
            Self::Hook => "hook",
            Self::Hooked => "hooked",
            Self::Rebooting => "rebooting",
            Self::Waiting => "waiting",
            Self::Returning => "returning",
            Self::Done => "done",
        }
    }

    fn parse(word: &str) -> Option<Self> {
        [
            Self::Evacuating,
            Self::Hook,
            Self::Hooked,
            Self::Rebooting,
            Self::Waiting,
            Self::Returning,
            Self::Done,
        ]
        .into_iter()
        .find(|s| s.as_str() == word)
    }
}

/// One node's progress as kept in Proxmox.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NodeProgress {
    /// The node.
    pub node: String,
    /// Its step.
    pub step: Step,
    /// For `rebooting`: its boot time (epoch secs, the cluster's clock) before the reboot.
    pub boot: i64,
    /// The node whose notes hold the line.
    pub holder: String,
    /// Why the step failed, when the run stopped there; `None` while it goes on (or a rerun
    /// continues it).
    pub error: Option<String>,
}

/// A node of a rolling maintenance about to start.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Queued {
    /// The node.
    pub node: String,
    /// Its progress kept in Proxmox: `None` when the run has not reached it yet.
    pub progress: Option<NodeProgress>,
}

/// The nodes a run of `targets` takes, in its order, each as `progress` has it now: the nodes
/// out (any step but done, even ones outside `targets`) first, as the run finishes them first;
/// then `targets` in order, those an earlier run did as done.
pub fn queue(targets: &[String], progress: &BTreeMap<String, NodeProgress>) -> Vec<Queued> {
    let out = progress.values().filter(|p| p.step != Step::Done);
    let mut order: Vec<Queued> = out
        .map(|p| Queued {
            node: p.node.clone(),
            progress: Some(p.clone()),
        })
        .collect();
    for n in targets {
        if order.iter().all(|q| &q.node != n) {
            order.push(Queued {
                node: n.clone(),
                progress: progress.get(n).cloned(),
            });
        }
    }
    order
}

/// A progress line's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Line {
    node: String,
    step: Step,
    boot: i64,
    error: Option<String>,
}

/// The progress line's fields; `None` for any other line.
fn parse(line: &str) -> Option<Line> {
    let body = line.trim().strip_prefix(PREFIX)?.strip_suffix("-->")?;
    let (mut node, mut step, mut boot, mut error) = (None, None, 0, None);
    for word in body.split_whitespace() {
        match word.split_once('=') {
            Some(("node", v)) if !v.is_empty() => node = Some(v.to_owned()),
            Some(("step", v)) => step = Step::parse(v),
            Some(("boot", v)) => boot = v.parse().unwrap_or(0),
            Some(("error", v)) if !v.is_empty() => error = Some(decode(v)),
            _ => {}
        }
    }
    Some(Line {
        node: node?,
        step: step?,
        boot,
        error,
    })
}

/// `text` as one word that cannot end the HTML comment: `%`, `-`, `<`, `>`, white space,
/// controls and anything not ASCII as `%XX` (UTF-8 bytes).
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_graphic() && !matches!(b, b'%' | b'-' | b'<' | b'>') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The text [`encode`] wrote (a stray `%` stays as it is).
fn decode(word: &str) -> String {
    let bytes = word.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Every node's progress in the notes of the online nodes (node name → notes).
pub fn read(notes: &BTreeMap<String, String>) -> BTreeMap<String, NodeProgress> {
    let mut out = BTreeMap::new();
    for (holder, text) in notes {
        for l in text.lines().filter_map(parse) {
            out.insert(
                l.node.clone(),
                NodeProgress {
                    node: l.node,
                    step: l.step,
                    boot: l.boot,
                    holder: holder.clone(),
                    error: l.error,
                },
            );
        }
    }
    out
}

/// The line of `node` at `step`, with why it failed there if it did.
fn line(node: &str, step: Step, boot: i64, error: Option<&str>) -> String {
    let error = error.map_or(String::new(), |e| format!(" error={}", encode(e)));
    format!(
        "{PREFIX}node={node} step={} boot={boot}{error} -->",
        step.as_str()
    )
}

/// Seconds a boot time computed from the cluster's clock and the node's uptime may wander
/// between reads (both are whole seconds, from two clocks): a boot time must be later than the
/// one before the reboot by more than this to count as a new boot.
const BOOT_SLACK_SECS: i64 = 10;

/// What runs on a node once it is empty, before its reboot: an admin's command, given the node's
/// name as its last argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    /// The program and its first arguments.
    pub command: Vec<String>,
}

/// The hook's exit code that says "nothing to do": the node needs no reboot.
pub const HOOK_NOTHING_TO_DO: i32 = 10;

/// How a rolling maintenance runs.
#[derive(Debug, Clone, PartialEq)]
pub struct RollingOptions {
    /// How nodes are emptied.
    pub evacuate: EvacuateOptions,
    /// The admin's hook, if any.
    pub hook: Option<Hook>,
    /// Reboot each node through the API (`POST /nodes/{node}/status`, `reboot`).
    pub reboot: bool,
    /// Longest wait for a rebooted node to be online and the cluster quorate.
    pub boot_timeout: Duration,
    /// Pause between reads while waiting.
    pub poll: Duration,
    /// Take the guests back home once a node is done.
    pub return_home: bool,
    /// Reboot a node even when running guests stay on it (ignored, locked): the reboot stops
    /// them. Off: such a node stops the run before its reboot.
    pub stop_left: bool,
    /// Most nodes out at a time (0 counts as 1); fewer while quorum, room, N+1 headroom or the
    /// rules demand.
    pub parallel: usize,
}

impl Default for RollingOptions {
    fn default() -> Self {
        Self {
            evacuate: EvacuateOptions::default(),
            hook: None,
            reboot: true,
            boot_timeout: Duration::from_secs(900),
            poll: Duration::from_secs(2),
            return_home: true,
            stop_left: false,
            parallel: 1,
        }
    }
}

/// Why a rolling maintenance stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RollingError {
    /// A node named is not in the cluster.
    #[error("node {node:?} is not in the cluster; nodes: {known}")]
    UnknownNode {
        /// The name given.
        node: String,
        /// The cluster's nodes.
        known: String,
    },
    /// Taking the node out now would not be safe (quorum, N+1, a node down): nothing changed on it.
    #[error("node {node} is not taken out: {reason}")]
    Unsafe {
        /// The node.
        node: String,
        /// Why not.
        reason: String,
    },
    /// The zone could not be read (or its progress lines not written); nothing was started.
    #[error("cannot read the zone: {reason}")]
    Unreadable {
        /// Why, with the causes.
        reason: String,
    },
    /// The run was stopped (a signal, or its lease lapsed) between two nodes: none is out.
    #[error("{reason}")]
    Stopped {
        /// Why: the stop's reason (a signal, the lease lapsing).
        reason: String,
    },
    /// A step failed; the node's progress line says where it stopped.
    #[error("node {node} stopped at step {}: {reason}", step.as_str())]
    Failed {
        /// The node.
        node: String,
        /// The step that failed.
        step: Step,
        /// Why.
        reason: String,
    },
}

/// What a finished rolling maintenance did.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct RollingReport {
    /// Nodes taken through maintenance by this run, in order.
    pub done: Vec<String>,
    /// Nodes an earlier run had done already.
    pub skipped: Vec<String>,
    /// Migrations carried out (evacuations and returns).
    pub migrations: usize,
}

/// News of a node's step, for the person (or the metrics) watching.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct News {
    /// The node.
    pub node: String,
    /// The step it is at now.
    pub step: Step,
    /// One line for people.
    pub line: String,
}

/// Where news goes.
pub type Tell<'a> = &'a (dyn Fn(News) + Sync);

/// News of `node` at `step`.
fn news(node: &str, step: Step, line: String) -> News {
    News {
        node: node.to_owned(),
        step,
        line,
    }
}

impl Executor {
    /// Why a stopped run starts no further step: the stop's reason (a signal, the lease lapsing).
    fn stop_reason(&self) -> String {
        let why = self.stop.reason();
        format!(
            "the run was stopped ({}) and starts nothing more",
            why.as_deref().unwrap_or(crate::stop::REQUESTED)
        )
    }

    /// The progress lines of the zone now, and the notes of the online nodes.
    pub async fn rolling_progress(&self) -> crate::Result<BTreeMap<String, NodeProgress>> {
        let (_, notes) = self.read_with_notes().await?;
        Ok(read(&notes))
    }

    /// Takes `nodes` (none: every node, by name) through maintenance one at a time; see the
    /// module docs. A rerun continues where an earlier run stopped.
    pub async fn rolling(
        &self,
        nodes: &[String],
        options: &RollingOptions,
        tell: Tell<'_>,
    ) -> Result<RollingReport, RollingError> {
        let fail = |node: &str, step: Step, reason: String| RollingError::Failed {
            node: node.to_owned(),
            step,
            reason,
        };
        let model = self.read().await.map_err(|e| unreadable(&e))?;
        let all = names(&model.cluster);
        let targets = targets(&model.cluster, nodes)?;
        let mut report = RollingReport::default();
        let progress = self.rolling_progress().await.map_err(|e| unreadable(&e))?;
        report.skipped = targets
            .iter()
            .filter(|n| progress.get(*n).is_some_and(|p| p.step == Step::Done))
            .cloned()
            .collect();
        for n in &report.skipped {
            tell(news(
                n,
                Step::Done,
                format!("{n}: done by an earlier run, skipped"),
            ));
        }
        // Emptying nodes and taking guests home go one node at a time, even within a wave.
        let moves = tokio::sync::Mutex::new(());
        loop {
            if self.stop.is_stopped() {
                return Err(RollingError::Stopped {
                    reason: self.stop_reason(),
                });
            }
            let progress = self.rolling_progress().await.map_err(|e| unreadable(&e))?;
            // Nodes out (any step but done) are finished first, even ones another run started.
            let out: Vec<(String, Option<NodeProgress>)> = progress
                .values()
                .filter(|p| p.step != Step::Done)
                .map(|p| (p.node.clone(), Some(p.clone())))
                .collect();
            let fresh = out.is_empty();
            let wave = if fresh {
                let rest: Vec<String> = targets
                    .iter()
                    .filter(|n| !progress.contains_key(*n))
                    .cloned()
                    .collect();
                if rest.is_empty() {
                    break;
                }
                let (wave, waits) = self.next_wave(&rest, options).await;
                if let Some((n, why)) = waits {
                    tracing::info!(node = %n, "rolling maintenance: waits for a later wave: {why}");
                }
                wave.into_iter().map(|n| (n, None)).collect()
            } else {
                out
            };
            let names: Vec<String> = wave.iter().map(|(n, _)| n.clone()).collect();
            // Progress lines stay on nodes that are not out, readable while the wave reboots.
            let mut holders: Vec<String> =
                all.iter().filter(|n| !names.contains(n)).cloned().collect();
            if holders.is_empty() {
                holders = all.clone();
            }
            let wave = if fresh {
                // Every node of the wave is marked before any is emptied, so that no guest is
                // moved onto a node about to go. A node that may not go after all (the cluster
                // changed since the wave was chosen) waits for a later wave; the first one's
                // refusal stops the run, as it would alone.
                let mut taken: Vec<String> = Vec::new();
                for (n, _) in &wave {
                    let mut with = taken.clone();
                    with.push(n.clone());
                    match self.take_out(n, &with, &holders, options).await {
                        Ok(()) => {
                            tell(news(
                                n,
                                Step::Evacuating,
                                format!("{n}: out of service, being emptied"),
                            ));
                            taken = with;
                        }
                        Err(e) if taken.is_empty() => return Err(e),
                        Err(e) => {
                            tracing::info!(node = %n, "rolling maintenance: waits for a later wave: {e}");
                        }
                    }
                }
                taken.into_iter().map(|n| (n, None)).collect()
            } else {
                wave
            };
            let (holders, moves) = (&holders, &moves);
            let results =
                futures_util::future::join_all(wave.into_iter().map(|(n, at)| async move {
                    let r = self.one_node(&n, at, holders, moves, options, tell).await;
                    (n, r)
                }))
                .await;
            let mut first = None;
            for (node, r) in results {
                match r {
                    Ok(n) => {
                        report.migrations += n;
                        report.done.push(node);
                    }
                    Err(e) => {
                        if let RollingError::Failed { node, reason, .. } = &e {
                            self.keep_failure(node, reason, holders).await;
                        }
                        first.get_or_insert(e);
                    }
                }
            }
            if let Some(e) = first {
                return Err(e);
            }
        }
        // Every node is done: the run's lines go.
        for p in self
            .rolling_progress()
            .await
            .map_err(|e| unreadable(&e))?
            .values()
        {
            self.set_progress(&p.node, None, &all)
                .await
                .map_err(|e| fail(&p.node, Step::Done, e))?;
        }
        Ok(report)
    }

    /// Writes (`Some`) or removes (`None`) the progress line of `node`, held by the first other
    /// node by name; lines of it held elsewhere go.
    async fn set_progress(
        &self,
        node: &str,
        at: Option<(Step, i64)>,
        all: &[String],
    ) -> Result<(), String> {
        self.write_line(
            node,
            at.map(|(step, boot)| line(node, step, boot, None)),
            all,
        )
        .await
    }

    /// Keeps in the progress line of `node` why its run stopped (at the step and boot time the
    /// line has), for whoever reads the progress later; a failure to write it is logged only.
    async fn keep_failure(&self, node: &str, reason: &str, all: &[String]) {
        let at = match self.rolling_progress().await {
            Ok(p) => p.get(node).map(|p| (p.step, p.boot)),
            Err(e) => {
                tracing::warn!(node, error = %error_chain(&e), "cannot read the rolling progress");
                return;
            }
        };
        let Some((step, boot)) = at else { return };
        let new = line(node, step, boot, Some(reason));
        if let Err(e) = self.write_line(node, Some(new), all).await {
            tracing::warn!(node, error = %e, "cannot keep why the rolling maintenance stopped");
        }
    }

    /// Writes (`Some`) or removes (`None`) the progress line of `node` in the notes of its
    /// holder; lines of it held elsewhere go.
    async fn write_line(
        &self,
        node: &str,
        new: Option<String>,
        all: &[String],
    ) -> Result<(), String> {
        let holder = all
            .iter()
            .find(|n| n.as_str() != node)
            .ok_or_else(|| "no other node to keep the progress in".to_owned())?;
        let (_, notes) = self.read_with_notes().await.map_err(|e| error_chain(&e))?;
        let mine = |l: &str| parse(l).is_some_and(|l| l.node == node);
        for (other, text) in &notes {
            if other != holder && text.lines().any(mine) {
                crate::notes_edit::edit(self.api(), other, |t| {
                    crate::notes_edit::with_line(t, mine, None)
                })
                .await
                .map_err(|e| error_chain(&e))?;
            }
        }
        crate::notes_edit::edit(self.api(), holder, |t| {
            crate::notes_edit::with_line(t, mine, new.as_deref())
        })
        .await
        .map_err(|e| error_chain(&e))?;
        Ok(())
    }

    /// The boot time of `node` (epoch secs, the cluster's clock) and whether it is online, and
    /// whether the cluster is quorate.
    async fn boot_state(&self, node: &str) -> Result<(Option<i64>, bool, bool), String> {
        let resources = self
            .api()
            .cluster_resources(Some(ResourceType::Node))
            .await
            .map_err(|e| error_chain(&e))?;
        let now = self.api().server_time().unwrap_or_else(|| self.now());
        let r = resources.iter().find(|r| r.node.as_deref() == Some(node));
        let online = r.is_some_and(|r| r.status.as_deref() == Some("online"));
        let boot = r
            .and_then(|r| r.uptime)
            .filter(|_| online)
            .map(|u| now - i64::try_from(u).unwrap_or(i64::MAX));
        let quorate = self
            .api()
            .cluster_status()
            .await
            .map_err(|e| error_chain(&e))?
            .iter()
            .find(|e| e.kind.as_deref() == Some("cluster"))
            .and_then(|e| e.quorate)
            .unwrap_or(false);
        Ok((boot, online, quorate))
    }

    /// Takes one node through its remaining steps, from `at` (none: just taken out); the
    /// migrations carried out.
    async fn one_node(
        &self,
        node: &str,
        at: Option<NodeProgress>,
        all: &[String],
        moves: &tokio::sync::Mutex<()>,
        options: &RollingOptions,
        tell: Tell<'_>,
    ) -> Result<usize, RollingError> {
        let fail = |step: Step, reason: String| RollingError::Failed {
            node: node.to_owned(),
            step,
            reason,
        };
        let mut migrations = 0;
        let mut step = match &at {
            Some(p) => {
                tell(news(
                    node,
                    p.step,
                    format!("{node}: continuing at step {}", p.step.as_str()),
                ));
                if p.error.is_some() {
                    // Going on: the reason of the last stop no longer holds.
                    self.set_progress(node, Some((p.step, p.boot)), all)
                        .await
                        .map_err(|r| fail(p.step, r))?;
                }
                p.step
            }
            None => Step::Evacuating,
        };
        let mut boot = at.as_ref().map_or(0, |p| p.boot);
        loop {
            // A stop starts no further step; the node's line keeps where a rerun goes on.
            if step != Step::Done && self.stop.is_stopped() {
                return Err(fail(step, self.stop_reason()));
            }
            match step {
                Step::Evacuating => {
                    let _moving = moves.lock().await;
                    migrations += self.empty(node, options).await.map_err(|r| fail(step, r))?;
                    step = if options.hook.is_some() {
                        tell(news(
                            node,
                            Step::Hook,
                            format!("{node}: empty, running the hook"),
                        ));
                        Step::Hook
                    } else {
                        Step::Hooked
                    };
                    self.set_progress(node, Some((step, 0)), all)
                        .await
                        .map_err(|r| fail(step, r))?;
                }
                Step::Hook => {
                    let done = match &options.hook {
                        Some(hook) => run_hook(hook, node).await.map_err(|r| fail(step, r))?,
                        None => true,
                    };
                    step = if done {
                        Step::Hooked
                    } else {
                        tell(news(
                            node,
                            Step::Returning,
                            format!("{node}: hook says nothing to do: no reboot"),
                        ));
                        Step::Returning
                    };
                    self.set_progress(node, Some((step, 0)), all)
                        .await
                        .map_err(|r| fail(step, r))?;
                }
                Step::Hooked => {
                    if options.reboot {
                        let (b, _, _) = self.boot_state(node).await.map_err(|r| fail(step, r))?;
                        boot = b.unwrap_or(0);
                        self.set_progress(node, Some((Step::Rebooting, boot)), all)
                            .await
                            .map_err(|r| fail(step, r))?;
                        self.reboot(node)
                            .await
                            .map_err(|r| fail(Step::Rebooting, r))?;
                        step = Step::Waiting;
                        self.set_progress(node, Some((step, boot)), all)
                            .await
                            .map_err(|r| fail(step, r))?;
                        tell(news(node, Step::Waiting, format!("{node}: rebooting")));
                    } else {
                        step = Step::Returning;
                        self.set_progress(node, Some((step, 0)), all)
                            .await
                            .map_err(|r| fail(step, r))?;
                    }
                }
                Step::Rebooting | Step::Waiting => {
                    // At `rebooting` a run may have stopped before Proxmox accepted the reboot:
                    // a node still up from before is asked again.
                    self.wait_back(node, boot, step == Step::Rebooting, options)
                        .await
                        .map_err(|r| fail(step, r))?;
                    tell(news(
                        node,
                        Step::Returning,
                        format!("{node}: back online, the cluster quorate"),
                    ));
                    step = Step::Returning;
                    self.set_progress(node, Some((step, 0)), all)
                        .await
                        .map_err(|r| fail(step, r))?;
                }
                Step::Returning => {
                    let _moving = moves.lock().await;
                    maintenance::set(self.api(), node, false)
                        .await
                        .map_err(|e| fail(step, error_chain(&e)))?;
                    if options.return_home {
                        migrations += self
                            .go_home(node, options)
                            .await
                            .map_err(|r| fail(step, r))?;
                    }
                    step = Step::Done;
                    self.set_progress(node, Some((step, 0)), all)
                        .await
                        .map_err(|r| fail(step, r))?;
                    tell(news(node, Step::Done, format!("{node}: done")));
                }
                Step::Done => return Ok(migrations),
            }
        }
    }

    /// Whether a rolling maintenance of `nodes` (none: every node) could start now: when no
    /// node is out, whether the first it would take out may go. The error such a run would stop
    /// with at once, before changing anything; else the run's nodes in the order it takes them,
    /// each as it is at the start ([`queue`]). Changes nothing itself.
    pub async fn rolling_check(
        &self,
        nodes: &[String],
        options: &RollingOptions,
    ) -> Result<Vec<Queued>, RollingError> {
        let (model, notes) = self.read_with_notes().await.map_err(|e| unreadable(&e))?;
        let targets = targets(&model.cluster, nodes)?;
        let progress = read(&notes);
        let order = queue(&targets, &progress);
        if progress.values().any(|p| p.step != Step::Done) {
            return Ok(order);
        }
        if let Some(first) = targets.iter().find(|n| !progress.contains_key(*n)) {
            self.may_go(first, std::slice::from_ref(first), options)
                .await?;
        }
        Ok(order)
    }

    /// Whether `node` may go out now (the other nodes of its `wave` taken out before it may be
    /// out already): every other node online, quorum, and its guests placed on the others.
    async fn may_go(
        &self,
        node: &str,
        wave: &[String],
        options: &RollingOptions,
    ) -> Result<(), RollingError> {
        let unsafe_ = |reason: String| RollingError::Unsafe {
            node: node.to_owned(),
            reason,
        };
        let model = self.read().await.map_err(|e| unsafe_(error_chain(&e)))?;
        wave::may_leave(&model.cluster, wave).map_err(unsafe_)?;
        let plan = self
            .plan(&evacuation(node, options))
            .await
            .map_err(|e| unsafe_(error_chain(&e)))?;
        match wave::fit_nowhere(&plan) {
            Some(why) => Err(unsafe_(why)),
            None => Ok(()),
        }
    }

    /// Checks that `node` may go out now ([`Self::may_go`]), then records its guests' homes,
    /// marks it in maintenance and writes its progress line, in that order.
    async fn take_out(
        &self,
        node: &str,
        wave: &[String],
        all: &[String],
        options: &RollingOptions,
    ) -> Result<(), RollingError> {
        let unsafe_ = |reason: String| RollingError::Unsafe {
            node: node.to_owned(),
            reason,
        };
        self.may_go(node, wave, options).await?;
        self.record_homes(node)
            .await
            .map_err(|e| unsafe_(error_chain(&e)))?;
        maintenance::set(self.api(), node, true)
            .await
            .map_err(|e| unsafe_(error_chain(&e)))?;
        self.set_progress(node, Some((Step::Evacuating, 0)), all)
            .await
            .map_err(unsafe_)?;
        Ok(())
    }

    /// Empties `node`; the migrations done. A failed migration, a guest that fits nowhere, or
    /// (before a reboot) a running guest left on it is a failure.
    async fn empty(&self, node: &str, options: &RollingOptions) -> Result<usize, String> {
        let goal = evacuation(node, options);
        let plan = self.plan(&goal).await.map_err(|e| error_chain(&e))?;
        let mut n = plan.migrations.len();
        let mut outcomes = BTreeMap::new();
        // Without migrations the round still waits for a migration in flight onto the node.
        if n > 0 || self.unsettled(&plan, &goal).await.unwrap_or(false) {
            let report = self.execute(plan.clone(), &goal).await;
            if !report.is_clean() {
                return Err(format!("evacuation: {}", report.summary()));
            }
            n = report.done.len();
            outcomes = report.outcomes(&plan);
        }
        let model = self.read().await.map_err(|e| error_chain(&e))?;
        if let Some(idx) = model.cluster.node_idx(node) {
            let left = left_running_after(&model.cluster, &[idx], &plan, &outcomes);
            if !left.is_empty() && options.reboot && !options.stop_left {
                let who: Vec<String> = left
                    .iter()
                    .map(|l| format!("{} ({})", l.vmid, l.reason))
                    .collect();
                return Err(format!(
                    "{} running guest(s) still on it, a reboot would stop them: {}",
                    left.len(),
                    who.join("; ")
                ));
            }
        }
        Ok(n)
    }

    /// Asks Proxmox to reboot `node`.
    async fn reboot(&self, node: &str) -> Result<(), String> {
        self.api()
            .node_command(node, NodeCommand::Reboot)
            .await
            .map_err(|e| format!("reboot refused: {}", error_chain(&e)))
    }

    /// Waits until `node` booted after `boot` (epoch secs), is online and the cluster quorate,
    /// up to the boot timeout. With `ask`, a node still up from before is asked for the reboot
    /// once more: the run may have been stopped between writing its line and asking.
    async fn wait_back(
        &self,
        node: &str,
        boot: i64,
        ask: bool,
        options: &RollingOptions,
    ) -> Result<(), String> {
        let start = tokio::time::Instant::now();
        let mut asked_again = !ask;
        loop {
            match self.boot_state(node).await {
                Ok((Some(b), true, true)) if b > boot + BOOT_SLACK_SECS => return Ok(()),
                Ok((Some(b), true, _)) if b <= boot + BOOT_SLACK_SECS && !asked_again => {
                    self.reboot(node).await?;
                    asked_again = true;
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(node, error = %e, "cannot read the node's state"),
            }
            if start.elapsed() >= options.boot_timeout {
                return Err(format!(
                    "not back online and quorate within {} s of the reboot",
                    options.boot_timeout.as_secs()
                ));
            }
            if self.stop.is_stopped() {
                return Err(self.stop_reason());
            }
            tokio::time::sleep(options.poll).await;
        }
    }

    /// Takes the guests recorded on `node` back home; the migrations done. One that failed is a
    /// failure; guests that may not go back are left away, kept in the node's notes.
    async fn go_home(&self, node: &str, options: &RollingOptions) -> Result<usize, String> {
        let (goal, plan) = self
            .plan_return(node, &options.evacuate)
            .await
            .map_err(|e| error_chain(&e))?;
        let n = plan.migrations.len();
        if n > 0 {
            let report = self.execute(plan, &goal).await;
            if !report.is_clean() {
                return Err(format!("back home: {}", report.summary()));
            }
        }
        self.settle_homes(node).await.map_err(|e| error_chain(&e))?;
        Ok(n)
    }
}

/// The nodes a run of `nodes` goes through, as Proxmox spells them (none named: every node, by
/// name).
fn targets(cluster: &flxp_core::Cluster, nodes: &[String]) -> Result<Vec<String>, RollingError> {
    let all = names(cluster);
    if nodes.is_empty() {
        return Ok(all);
    }
    let named = nodes
        .iter()
        .map(|n| {
            cluster
                .node_idx_loose(n)
                .map(|i| cluster.node(i).name.clone())
                .ok_or_else(|| RollingError::UnknownNode {
                    node: n.clone(),
                    known: all.join(", "),
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(once(named))
}

/// `names` in their order, each once: a node named twice is taken through maintenance once, and
/// its schedule says so.
pub(crate) fn once(names: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    names
        .into_iter()
        .filter(|n| seen.insert(n.clone()))
        .collect()
}

/// The names of the cluster's nodes, in order.
fn names(cluster: &flxp_core::Cluster) -> Vec<String> {
    let mut all: Vec<String> = cluster.nodes().iter().map(|n| n.name.clone()).collect();
    all.sort();
    all
}

/// A read of the zone that failed, as the run's error.
fn unreadable(e: &crate::Error) -> RollingError {
    RollingError::Unreadable {
        reason: error_chain(e),
    }
}

/// The goal that empties `node` for a rolling maintenance.
fn evacuation(node: &str, options: &RollingOptions) -> Goal {
    Goal::Evacuate {
        nodes: vec![node.to_owned()],
        options: options.evacuate.clone(),
    }
}

/// Runs the hook for `node` off the async workers: `Ok(true)` done, `Ok(false)` nothing to do
/// ([`HOOK_NOTHING_TO_DO`]), `Err` with the exit status and its last output otherwise.
async fn run_hook(hook: &Hook, node: &str) -> Result<bool, String> {
    let Some((program, args)) = hook.command.split_first() else {
        return Err("the hook command is empty".into());
    };
    let mut cmd = std::process::Command::new(program);
    cmd.args(args).arg(node).env("FLXP_NODE", node);
    let shown = hook.command.join(" ");
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .map_err(|e| format!("hook did not finish: {e}"))?
        .map_err(|e| format!("cannot run hook {shown:?}: {e}"))?;
    match out.status.code() {
        Some(0) => Ok(true),
        Some(HOOK_NOTHING_TO_DO) => Ok(false),
        code => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let last = stderr.lines().last().unwrap_or_default();
            Err(format!(
                "hook {shown:?} failed ({}){}",
                code.map_or("killed by a signal".to_owned(), |c| format!(
                    "exit code {c}"
                )),
                if last.is_empty() {
                    String::new()
                } else {
                    format!(": {last}")
                }
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_lines_are_read_from_any_online_nodes_notes() {
        let notes = BTreeMap::from([
            (
                "pve1".to_owned(),
                format!(
                    "Rack 4\n{}",
                    line("pve2", Step::Waiting, 1_700_000_000, None)
                ),
            ),
            ("pve2".to_owned(), line("pve1", Step::Done, 0, None)),
        ]);
        let p = read(&notes);
        assert_eq!(p.len(), 2);
        assert_eq!(p["pve2"].step, Step::Waiting);
        assert_eq!(p["pve2"].boot, 1_700_000_000);
        assert_eq!(p["pve2"].holder, "pve1");
        assert_eq!(p["pve1"].step, Step::Done);
        assert_eq!(p["pve2"].error, None);
        assert_eq!(
            parse("<!-- flxp-rolling node=a step=asleep boot=1 -->"),
            None
        );
    }

    #[test]
    fn a_run_takes_the_nodes_out_first_then_its_own_in_order() {
        let notes = BTreeMap::from([(
            "pve1".to_owned(),
            format!(
                "{}\n{}",
                line("pve3", Step::Waiting, 1_700_000_000, None),
                line("pve4", Step::Done, 0, None)
            ),
        )]);
        let progress = read(&notes);
        let targets: Vec<String> = ["pve4", "pve2", "pve3", "pve1"].map(String::from).into();
        let order: Vec<(String, Option<Step>)> = queue(&targets, &progress)
            .into_iter()
            .map(|q| (q.node, q.progress.map(|p| p.step)))
            .collect();
        assert_eq!(
            order,
            [
                ("pve3".to_owned(), Some(Step::Waiting)),
                ("pve4".to_owned(), Some(Step::Done)),
                ("pve2".to_owned(), None),
                ("pve1".to_owned(), None),
            ]
        );
    }

    #[test]
    fn a_failures_reason_survives_its_line_and_cannot_end_the_comment() {
        let reason = "hook \"sh /tmp/x y.sh\" failed (exit code 7): apt --fix: 100% <done> -->ü";
        let text = line("pve2", Step::Hook, 0, Some(reason));
        assert_eq!(text.matches("-->").count(), 1, "{text}");
        assert!(text.ends_with(" -->"), "{text}");
        let l = parse(&text).unwrap();
        assert_eq!(l.step, Step::Hook);
        assert_eq!(l.error.as_deref(), Some(reason));
        assert_eq!(decode("50%-off%zz"), "50%-off%zz");
    }
}
