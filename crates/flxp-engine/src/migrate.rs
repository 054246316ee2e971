//! Carrying out one migration: ask Proxmox where the guest may go, start the move with the
//! parameters the guest needs, and follow it to its end.
//!
//! - qemu: `GET .../migrate` first; the target must be in `allowed_nodes` (else the blockers are
//!   named); a running VM goes `online=1`, with `with-local-disks=1` when it has local disks (if
//!   the config allows it); a stopped one moves offline.
//! - lxc: running containers cannot live-migrate: `restart=1` when the round allows it.
//! - The task is polled until it stops, in the task list every migration in flight shares
//!   (`refresh.rs`: one `/cluster/tasks` per poll interval for all), or on the node of its UPID
//!   while the list does not hold it; progress bars read its log at most every 5 s
//!   (`PROGRESS_LOG_EVERY`). For an HA-managed guest Proxmox
//!   answers with an `hamigrate` task that only queues the move: the guest is then followed in
//!   `/cluster/resources` until it is on its target, or HA's own migration task fails, or the
//!   service errors, or the timeout passes.
//!
//! - A task whose status cannot be read (timeouts, API errors) may well have ended: before a
//!   migration is called failed the guest is looked up in `/cluster/resources`. On its target and
//!   unlocked, it landed; still on its source, unlocked, at the timeout, it failed; and when the
//!   cluster cannot be read either, the outcome is reported as unknown, never as a failure.
//!
//! It decides nothing: which guest goes where is the plan's.

use std::collections::BTreeMap;
use std::time::Duration;

use flxp_core::balance::Migration;
use flxp_core::cluster::GuestKind;
use flxp_pve::Pve;
use flxp_pve::types::migrate::NotAllowedNode;
use flxp_pve::types::{LxcMigrateParams, QemuMigrateParams, TaskLogQuery, TaskStatus, Upid};
use tokio::time::Instant;

use crate::progress::{Event, Progress, fraction_from_log};
use crate::refresh::ReadCache;

/// Task types of the migration worker that HA starts for a queued move.
const HA_WORKER_TYPES: [&str; 2] = ["qmigrate", "vzmigrate"];
/// Log lines read per poll when following progress.
const LOG_PAGE: u64 = 200;
/// Least time between two reads of a migration's log for its progress: the polls in between
/// cost no call of their own (the task list is shared), the bar moves a little less often.
const PROGRESS_LOG_EVERY: Duration = Duration::from_secs(5);
/// Progress from elapsed time never claims more than this before the task says it is done.
const MAX_GUESSED_FRACTION: f64 = 0.95;

/// How one migration is started and followed.
#[derive(Debug, Clone, PartialEq)]
pub struct MigrateSettings {
    /// Pause between polls.
    pub poll: Duration,
    /// Give up following after this long.
    pub timeout: Duration,
    /// Whether `with-local-disks=1` may be sent when the precondition shows local disks.
    pub with_local_disks: bool,
    /// Whether running containers may be moved with `restart=1`.
    pub allow_restart: bool,
    /// Bytes per second assumed when guessing progress from elapsed time.
    pub expected_bandwidth: f64,
}

/// A migration that ended with the guest on its target.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Landed {
    /// Seconds from the start call to the end.
    pub secs: f64,
    /// Whether HA carried it out.
    pub ha: bool,
}

/// Why a migration did not land, in words for the report (Proxmox's error text where it gave one).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Failure {
    /// It failed, or flxp did not start it (precondition blockers, a timeout).
    Failed(String),
    /// It was started, but how it ended could not be read from Proxmox.
    Unknown(String),
}

impl Failure {
    /// The words of either kind.
    pub fn text(&self) -> &str {
        match self {
            Self::Failed(t) | Self::Unknown(t) => t,
        }
    }
}

impl From<String> for Failure {
    fn from(text: String) -> Self {
        Self::Failed(text)
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Failed(t) => f.write_str(t),
            Self::Unknown(t) => write!(f, "outcome unknown: {t}"),
        }
    }
}

/// Why a migration could not be started, or its guest not be found: the words become a
/// [`Failure`]'s (or, for an unreadable cluster, part of one).
// The Proxmox errors are fields named `error`, not `#[source]`: the message already holds them,
// and a chain printer (`{:#}`) would repeat them. Boxed: Proxmox's error is large, and every
// step's `Result` carries this type.
#[derive(Debug, thiserror::Error)]
enum MigrateError {
    /// `/cluster/resources` could not be read.
    #[error("{error}")]
    ClusterUnreadable {
        /// Proxmox's answer.
        error: Box<flxp_pve::Error>,
    },
    /// The precondition check (`GET .../migrate`) failed.
    #[error("precondition check failed: {error}")]
    Precondition {
        /// Proxmox's answer.
        error: Box<flxp_pve::Error>,
    },
    /// The precondition check does not allow the target.
    #[error("Proxmox does not allow {to} as target: {}", why.join("; "))]
    TargetNotAllowed {
        /// The target node.
        to: String,
        /// The blockers, in words (at least one).
        why: Vec<String>,
    },
    /// Local devices pin the VM to its node.
    #[error(
        "local devices {} keep it on {from} (only root@pam may force such a migration)",
        devices.join(", ")
    )]
    LocalDevices {
        /// The devices Proxmox names.
        devices: Vec<String>,
        /// The node it stays on.
        from: String,
    },
    /// A linked clone on local storage, which Proxmox refuses only after starting the task.
    #[error("{volid} is a linked clone of a template on local storage: Proxmox cannot migrate it")]
    LinkedClone {
        /// The clone's volume.
        volid: String,
    },
    /// A target storage has less room than the local disks copied onto it.
    #[error(
        "storage {storage} on {node} has {} free, its local disks need {}",
        flxp_core::units::fmt_bytes(*avail),
        flxp_core::units::fmt_bytes(*need)
    )]
    NoRoom {
        /// The storage id.
        storage: String,
        /// The target node.
        node: String,
        /// Its free bytes.
        avail: u64,
        /// The bytes the disks need.
        need: u64,
    },
    /// A live migration would copy local disks, which the config forbids.
    #[error(
        "local disks {} need with-local-disks for a live migration, which [migration] \
         with-local-disks = false forbids",
        disks.join(", ")
    )]
    LocalDisksForbidden {
        /// The local volumes.
        disks: Vec<String>,
    },
    /// A running container would have to restart, which the config forbids.
    #[error(
        "a running container cannot live-migrate and restarting it is not allowed \
         ([balance] restart-containers = false)"
    )]
    RestartForbidden,
    /// The migrate call itself failed.
    #[error("{error}")]
    Start {
        /// Proxmox's answer.
        error: Box<flxp_pve::Error>,
    },
}

impl From<MigrateError> for Failure {
    fn from(e: MigrateError) -> Self {
        Self::Failed(e.to_string())
    }
}

/// How following a task ended.
enum Ended {
    /// The task stopped with this status.
    Task(Box<TaskStatus>),
    /// The task's status could not be read, but the guest is on its target, unlocked.
    SeenOnTarget,
}

/// Where the cluster shows the guest, when the task cannot tell.
enum Seen {
    /// On its target and unlocked: it landed.
    Landed,
    /// On its source and unlocked: nothing is moving it.
    Idle,
    /// Locked, or on another node: something is still going on.
    Busy,
    /// Gone from the cluster.
    Vanished,
}

/// One migration in flight, for progress events.
struct Follow<'a> {
    api: &'a Pve,
    /// The task list every migration in flight polls ([`ReadCache::tasks`]).
    board: &'a ReadCache,
    m: &'a Migration,
    zone: &'a str,
    settings: &'a MigrateSettings,
    progress: &'a dyn Progress,
    started: Instant,
    last_fraction: f64,
    log_has_fractions: bool,
}

impl Follow<'_> {
    fn expected_secs(&self) -> f64 {
        (self.m.bytes as f64 / self.settings.expected_bandwidth.max(1.0)).max(1.0)
    }

    fn report(&mut self, fraction: f64) {
        let fraction = fraction.clamp(0.0, 1.0);
        if fraction > self.last_fraction + 1e-9 {
            self.last_fraction = fraction;
            self.progress.event(&Event::Progress {
                zone: self.zone.to_owned(),
                vmid: self.m.vmid,
                fraction,
            });
        }
    }

    fn guess(&mut self) {
        let f = self.started.elapsed().as_secs_f64() / self.expected_secs();
        self.report(f.min(MAX_GUESSED_FRACTION));
    }

    fn timed_out(&self) -> bool {
        self.started.elapsed() >= self.settings.timeout
    }

    /// Where the cluster shows the guest now; `Err` when it cannot be read.
    async fn seen(&self) -> Result<Seen, MigrateError> {
        let resources = self
            .board
            .vm_resources(self.api, self.settings.poll, self.started)
            .await
            .map_err(|e| MigrateError::ClusterUnreadable { error: Box::new(e) })?;
        let guest = resources.iter().find(|r| {
            r.vmid == Some(self.m.vmid) && matches!(r.kind.as_deref(), Some("qemu" | "lxc"))
        });
        let Some(guest) = guest else {
            return Ok(Seen::Vanished);
        };
        let locked = guest.lock.as_deref().is_some_and(|l| !l.is_empty());
        Ok(match guest.node.as_deref() {
            Some(n) if n == self.m.to && !locked => Seen::Landed,
            Some(n) if n == self.m.from && !locked => Seen::Idle,
            _ => Seen::Busy,
        })
    }

    /// The verdict on a migration whose task status stayed unreadable until the timeout: the
    /// cluster decides, and only a cluster that cannot be read leaves it unknown.
    async fn settle(&self, upid: &Upid, why: &str) -> Result<Ended, Failure> {
        let secs = self.settings.timeout.as_secs();
        match self.seen().await {
            Ok(Seen::Landed) => Ok(Ended::SeenOnTarget),
            Ok(Seen::Idle) => Err(Failure::Failed(format!(
                "task {upid} could not be read for {secs} s ({why}) and the guest is still on {}",
                self.m.from
            ))),
            Ok(Seen::Vanished) => Err(Failure::Failed(format!(
                "guest {} vanished from the cluster",
                self.m.vmid
            ))),
            Ok(Seen::Busy) => Err(Failure::Unknown(format!(
                "task {upid} could not be read for {secs} s ({why}) and the guest is still \
                 locked or elsewhere; Proxmox carries on with it"
            ))),
            Err(e) => Err(Failure::Unknown(format!(
                "task {upid} could not be read ({why}), nor the cluster ({e})"
            ))),
        }
    }

    /// Polls a task until it stops; reads new log lines for progress when wanted.
    async fn task(&mut self, upid: &Upid, with_progress: bool) -> Result<Ended, Failure> {
        let mut log_at = 0u64;
        let mut log_read: Option<Instant> = None;
        loop {
            let status = match self
                .board
                .task_status(self.api, upid, self.settings.poll, self.started)
                .await
            {
                Ok(status) => status,
                // An unreadable status says nothing of the task: it may well have ended.
                Err(e) => {
                    let why = e.to_string();
                    tracing::warn!(vmid = self.m.vmid, %upid, error = %why, "task status unreadable; looking at the cluster");
                    if let Ok(Seen::Landed) = self.seen().await {
                        return Ok(Ended::SeenOnTarget);
                    }
                    if self.timed_out() {
                        return self.settle(upid, &why).await;
                    }
                    tokio::time::sleep(self.settings.poll).await;
                    continue;
                }
            };
            if !status.is_running() {
                return Ok(Ended::Task(Box::new(status)));
            }
            if self.timed_out() {
                // Landed while we waited for a status that lagged behind: it is done.
                if let Ok(Seen::Landed) = self.seen().await {
                    return Ok(Ended::SeenOnTarget);
                }
                return Err(Failure::Failed(format!(
                    "still running after {} s (timeout-secs); Proxmox carries on with task {upid}",
                    self.settings.timeout.as_secs()
                )));
            }
            let wants = with_progress && self.progress.wants_fractions();
            let log_due = log_read.is_none_or(|t: Instant| t.elapsed() >= PROGRESS_LOG_EVERY);
            if wants && !log_due && !self.log_has_fractions {
                // Between log reads, elapsed time moves a bar that has no figures yet.
                self.guess();
            }
            if wants && log_due {
                log_read = Some(Instant::now());
                let query = TaskLogQuery {
                    start: Some(log_at),
                    limit: Some(LOG_PAGE),
                };
                let from_log = match self.api.task_log(upid, &query).await {
                    Ok(lines) => {
                        log_at += lines.len() as u64;
                        lines
                            .iter()
                            .rev()
                            .find_map(|l| l.t.as_deref().and_then(fraction_from_log))
                    }
                    // Progress is a nicety: a log that cannot be read is no failure.
                    Err(_) => None,
                };
                match from_log {
                    Some(f) => {
                        self.log_has_fractions = true;
                        self.report(f);
                    }
                    // An offline move logs no transfer figures: elapsed time is all there is.
                    None if !self.log_has_fractions => self.guess(),
                    None => {}
                }
            }
            tokio::time::sleep(self.settings.poll).await;
        }
    }

    /// Follows a guest that HA moves until it is on its target.
    async fn ha(&mut self, hamigrate: &Upid) -> Result<(), Failure> {
        match self.task(hamigrate, false).await? {
            Ended::Task(queued) if !queued.is_success() => {
                return Err(Failure::Failed(exit_text(&queued)));
            }
            Ended::SeenOnTarget => return Ok(()),
            Ended::Task(_) => {}
        }
        let since = hamigrate.starttime();
        let sid = format!(
            "{}:{}",
            match self.m.kind {
                GuestKind::Qemu => "vm",
                GuestKind::Lxc => "ct",
            },
            self.m.vmid
        );
        let vmid = self.m.vmid.to_string();
        loop {
            match self.seen().await {
                Ok(Seen::Landed) => return Ok(()),
                Ok(Seen::Vanished) => {
                    return Err(Failure::Failed(format!(
                        "guest {} vanished from the cluster",
                        self.m.vmid
                    )));
                }
                Ok(Seen::Idle | Seen::Busy) => {}
                // HA carries on without us: only the timeout ends the wait, as unknown.
                Err(e) if self.timed_out() => {
                    return Err(Failure::Unknown(format!(
                        "HA was asked to move it to {}, and the cluster could not be read \
                         ({e})",
                        self.m.to
                    )));
                }
                Err(e) => {
                    tracing::warn!(vmid = self.m.vmid, error = %e, "cluster unreadable while HA moves a guest");
                    tokio::time::sleep(self.settings.poll).await;
                    continue;
                }
            }
            // HA's own migration worker for this guest, started after our request, failed.
            if let Ok(tasks) = self
                .board
                .tasks(self.api, self.settings.poll, self.started)
                .await
            {
                let failed = tasks.iter().find(|t| {
                    t.kind
                        .as_deref()
                        .is_some_and(|k| HA_WORKER_TYPES.contains(&k))
                        && t.id.as_deref() == Some(vmid.as_str())
                        && t.starttime.is_some_and(|s| s >= since)
                        && !t.is_running()
                        && t.status
                            .as_deref()
                            .is_some_and(|s| !flxp_pve::types::tasks::is_success_exitstatus(s))
                });
                if let Some(t) = failed {
                    return Err(Failure::Failed(format!(
                        "HA's migration failed: {}",
                        t.status.as_deref().unwrap_or("unknown error")
                    )));
                }
            }
            if let Ok(status) = self
                .board
                .ha_status(self.api, self.settings.poll, self.started)
                .await
            {
                let service = status
                    .iter()
                    .find(|s| s.sid.as_deref() == Some(sid.as_str()));
                if let Some(state) = service.and_then(|s| s.state.as_deref()) {
                    if matches!(state, "error" | "fence" | "recovery") {
                        return Err(Failure::Failed(format!(
                            "HA service {sid} is in state {state}"
                        )));
                    }
                }
            }
            if self.timed_out() {
                return Err(Failure::Failed(format!(
                    "HA did not move it to {} within {} s (timeout-secs)",
                    self.m.to,
                    self.settings.timeout.as_secs()
                )));
            }
            self.guess();
            tokio::time::sleep(self.settings.poll).await;
        }
    }
}

impl Follow<'_> {
    /// Why a task failed: its exit status, with the cause its log gives when the status alone
    /// says little (Proxmox ends an aborted migration with just `migration aborted` and logs the
    /// cause as `ERROR: migration aborted (duration ..): <cause>`).
    async fn failure_text(&self, upid: &Upid, end: &TaskStatus) -> String {
        let exit = exit_text(end);
        let query = TaskLogQuery {
            start: Some(0),
            limit: Some(LOG_PAGE),
        };
        // The log is a nicety here: without it the exit status is still the answer.
        let Ok(lines) = self.api.task_log(upid, &query).await else {
            return exit;
        };
        let cause = lines.iter().find_map(|l| {
            let t = l.t.as_deref()?;
            t.find("ERROR: ")
                .map(|i| t[i + "ERROR: ".len()..].trim().to_owned())
        });
        with_cause(exit, cause)
    }
}

/// `exit` and the log's first error line, said once: the line alone when it starts with the exit
/// status (`migration aborted (duration ..): VM is locked (backup)`), the status alone when the
/// line only repeats it.
fn with_cause(exit: String, cause: Option<String>) -> String {
    match cause {
        Some(c) if c.starts_with(&exit) => c,
        Some(c) if !c.is_empty() && !exit.contains(&c) && !c.contains(&exit) => {
            format!("{exit}: {c}")
        }
        _ => exit,
    }
}

/// The text of a stopped task's exit status.
fn exit_text(status: &TaskStatus) -> String {
    status
        .exitstatus
        .clone()
        .unwrap_or_else(|| "stopped without an exit status".into())
}

/// Whether Proxmox's precondition check allows the target; if not, why, in words.
fn allowed_target(
    to: &str,
    allowed: &[String],
    not_allowed: &BTreeMap<String, NotAllowedNode>,
) -> Result<(), MigrateError> {
    if allowed.iter().any(|n| n == to) {
        return Ok(());
    }
    let mut why = Vec::new();
    if let Some(n) = not_allowed.get(to) {
        if !n.unavailable_storages.is_empty() {
            why.push(format!(
                "storage {} not available there",
                n.unavailable_storages.join(", ")
            ));
        }
        if !n.unavailable_resources.is_empty() {
            why.push(format!(
                "mapped resources {} missing there",
                n.unavailable_resources.join(", ")
            ));
        }
        for b in &n.blocking_ha_resources {
            why.push(format!(
                "HA {} rule of {}",
                b.cause.as_deref().unwrap_or("unknown"),
                b.sid.as_deref().unwrap_or("?")
            ));
        }
    }
    if why.is_empty() {
        why.push(format!(
            "not among the allowed nodes ({})",
            if allowed.is_empty() {
                "none".to_owned()
            } else {
                allowed.join(", ")
            }
        ));
    }
    Err(MigrateError::TargetNotAllowed {
        to: to.to_owned(),
        why,
    })
}

/// Whether a volume id is a linked clone's (`local-lvm:base-9001-disk-0/vm-501-disk-0`).
fn is_linked_clone(volid: &str) -> bool {
    volid
        .split_once(':')
        .is_some_and(|(_, name)| name.starts_with("base-") && name.contains('/'))
}

/// Checks that the target's storages (same ids: no `targetstorage` is sent) have room for the
/// local disks that would be copied; a storage the target does not report is left to Proxmox.
async fn target_room(
    api: &Pve,
    to: &str,
    disks: &[&flxp_pve::types::migrate::LocalDisk],
) -> Result<(), MigrateError> {
    let mut need: std::collections::BTreeMap<&str, u64> = std::collections::BTreeMap::new();
    for d in disks {
        let storage = d
            .volid
            .as_deref()
            .and_then(|v| v.split_once(':'))
            .map_or("", |(s, _)| s);
        let e = need.entry(storage).or_default();
        *e = e.saturating_add(d.size.unwrap_or(0));
    }
    // Without a storage list (a token lacking Datastore.Audit), Proxmox's own check decides.
    let storages = match api
        .node_storage(to, &flxp_pve::types::StorageQuery::default())
        .await
    {
        Ok(s) => s,
        Err(e) => {
            tracing::debug!(node = %to, error = %e, "storages not readable; room left to Proxmox");
            return Ok(());
        }
    };
    for (storage, bytes) in need {
        let avail = storages
            .iter()
            .find(|s| s.storage == storage)
            .and_then(|s| s.avail);
        if let Some(avail) = avail.filter(|&a| a < bytes) {
            return Err(MigrateError::NoRoom {
                storage: storage.to_owned(),
                node: to.to_owned(),
                avail,
                need: bytes,
            });
        }
    }
    Ok(())
}

/// Checks the precondition and starts the migration; the UPID of the task Proxmox started.
async fn start(
    api: &Pve,
    m: &Migration,
    settings: &MigrateSettings,
) -> Result<(Upid, bool), MigrateError> {
    let (started, running) = match m.kind {
        GuestKind::Qemu => {
            let pre = api
                .qemu_migrate_precondition(&m.from, m.vmid, Some(&m.to))
                .await
                .map_err(|e| MigrateError::Precondition { error: Box::new(e) })?;
            allowed_target(&m.to, &pre.allowed_nodes, &pre.not_allowed_nodes)?;
            if !pre.local_resources.is_empty() {
                return Err(MigrateError::LocalDevices {
                    devices: pre.local_resources.clone(),
                    from: m.from.clone(),
                });
            }
            let running = pre.running.unwrap_or(m.online);
            let disks: Vec<&flxp_pve::types::migrate::LocalDisk> = pre
                .local_disks
                .iter()
                .filter(|d| !d.cdrom.unwrap_or(false) && !d.is_unused.unwrap_or(false))
                .collect();
            let local: Vec<&str> = disks
                .iter()
                .map(|d| d.volid.as_deref().unwrap_or("?"))
                .collect();
            // Proxmox refuses these only after the task started; say why before asking.
            if let Some(v) = local.iter().find(|v| is_linked_clone(v)) {
                return Err(MigrateError::LinkedClone {
                    volid: (*v).to_owned(),
                });
            }
            if !disks.is_empty() {
                target_room(api, &m.to, &disks).await?;
            }
            let with_local = running && !local.is_empty();
            if with_local && !settings.with_local_disks {
                return Err(MigrateError::LocalDisksForbidden {
                    disks: local.iter().map(|&d| d.to_owned()).collect(),
                });
            }
            let params = QemuMigrateParams {
                target: m.to.clone(),
                online: running.then_some(true),
                with_local_disks: with_local.then_some(true),
                ..QemuMigrateParams::default()
            };
            (api.migrate_qemu(&m.from, m.vmid, &params).await, running)
        }
        GuestKind::Lxc => {
            let pre = api
                .lxc_migrate_precondition(&m.from, m.vmid, Some(&m.to))
                .await
                .map_err(|e| MigrateError::Precondition { error: Box::new(e) })?;
            allowed_target(&m.to, &pre.allowed_nodes, &pre.not_allowed_nodes)?;
            let running = pre.running.unwrap_or(m.online);
            if running && !settings.allow_restart {
                return Err(MigrateError::RestartForbidden);
            }
            let params = LxcMigrateParams {
                target: m.to.clone(),
                restart: running.then_some(true),
                ..LxcMigrateParams::default()
            };
            (api.migrate_lxc(&m.from, m.vmid, &params).await, running)
        }
    };
    Ok((
        started.map_err(|e| MigrateError::Start { error: Box::new(e) })?,
        running,
    ))
}

/// Carries out one migration and follows it to its end; emits `Started` and `Progress` events.
pub async fn migrate(
    api: &Pve,
    m: &Migration,
    zone: &str,
    settings: &MigrateSettings,
    progress: &dyn Progress,
) -> Result<Landed, Failure> {
    migrate_polling(api, m, zone, settings, progress, &ReadCache::new()).await
}

/// [`migrate`], its task polled through `board`'s task list, which every migration in flight
/// shares: one `/cluster/tasks` per poll interval for all of them.
pub(crate) async fn migrate_polling(
    api: &Pve,
    m: &Migration,
    zone: &str,
    settings: &MigrateSettings,
    progress: &dyn Progress,
    board: &ReadCache,
) -> Result<Landed, Failure> {
    let started = Instant::now();
    let (upid, online) = start(api, m, settings).await?;
    let ha = upid.kind() == "hamigrate";
    tracing::info!(
        vmid = m.vmid,
        from = %m.from,
        to = %m.to,
        online,
        ha,
        %upid,
        "migration started"
    );
    progress.event(&Event::Started {
        zone: zone.to_owned(),
        vmid: m.vmid,
        name: m.name.clone(),
        from: m.from.clone(),
        to: m.to.clone(),
        step: m.step,
        online,
        bytes: m.bytes,
    });
    let mut follow = Follow {
        api,
        board,
        m,
        zone,
        settings,
        progress,
        started,
        last_fraction: 0.0,
        log_has_fractions: false,
    };
    if ha {
        follow.ha(&upid).await?;
    } else if let Ended::Task(end) = follow.task(&upid, true).await? {
        if !end.is_success() {
            return Err(Failure::Failed(follow.failure_text(&upid, &end).await));
        }
    }
    follow.report(1.0);
    Ok(Landed {
        secs: started.elapsed().as_secs_f64(),
        ha,
    })
}

#[cfg(test)]
mod tests {
    use super::{MigrateError, allowed_target, with_cause};

    #[test]
    fn a_failure_names_the_cause_the_task_log_gives_once() {
        let aborted = || "migration aborted".to_owned();
        let line = "migration aborted (duration 00:00:01): VM is locked (backup)";
        assert_eq!(with_cause(aborted(), Some(line.into())), line);
        assert_eq!(
            with_cause(
                "migration problems".into(),
                Some("online migrate failure - unable to connect".into())
            ),
            "migration problems: online migrate failure - unable to connect"
        );
        assert_eq!(with_cause(aborted(), None), "migration aborted");
        assert_eq!(
            with_cause(
                "migration aborted: no route".into(),
                Some("online migrate failure - migration aborted: no route".into())
            ),
            "migration aborted: no route"
        );
        assert_eq!(
            with_cause(
                "VM is locked (backup)".into(),
                Some("VM is locked (backup)".into())
            ),
            "VM is locked (backup)"
        );
    }

    #[test]
    fn refusals_before_the_start_read_as_they_always_did() {
        let refused = allowed_target("pve3", &["pve2".into()], &Default::default()).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "Proxmox does not allow pve3 as target: not among the allowed nodes (pve2)"
        );
        assert!(allowed_target("pve2", &["pve2".into()], &Default::default()).is_ok());
        let disks = MigrateError::LocalDisksForbidden {
            disks: vec!["local-lvm:vm-1-disk-0".into(), "local:1/a.qcow2".into()],
        };
        assert_eq!(
            disks.to_string(),
            "local disks local-lvm:vm-1-disk-0, local:1/a.qcow2 need with-local-disks for a live \
             migration, which [migration] with-local-disks = false forbids"
        );
        assert_eq!(
            MigrateError::RestartForbidden.to_string(),
            "a running container cannot live-migrate and restarting it is not allowed ([balance] \
             restart-containers = false)"
        );
        let room = MigrateError::NoRoom {
            storage: "local-lvm".into(),
            node: "pve2".into(),
            avail: 1 << 30,
            need: 2 << 30,
        };
        assert!(
            room.to_string()
                .starts_with("storage local-lvm on pve2 has "),
            "{room}"
        );
        assert_eq!(
            super::Failure::from(MigrateError::LinkedClone {
                volid: "local-lvm:base-9-disk-0/vm-5-disk-0".into()
            })
            .to_string(),
            "local-lvm:base-9-disk-0/vm-5-disk-0 is a linked clone of a template on local \
             storage: Proxmox cannot migrate it"
        );
    }
}
