//! One active flxp per cluster: a lease kept in one node's notes, written with compare-and-swap.
//! The zone name in the line is for people: any lease line is the cluster's one lease, so two
//! configs naming one cluster differently still take turns.
//!
//! The lease is one HTML comment line in the `description` of `GET/PUT /nodes/{node}/config`
//! (invisible in the rendered notes):
//! `<!-- flxp-lease zone=<zone> holder=<host:pid:random> expires=<epoch secs> command=<cmd>
//! pidns=<pid space> -->` (`command`, the flxp command holding it, and `pidns`, the pid space of
//! the holder's pid, are optional: older flxp neither write nor need them, and ignore them when
//! reading). A write sends
//! the `digest` it read, and Proxmox refuses it under the node config's cluster-wide lock when the
//! file changed in between (pve-manager `PVE/API2/NodeConfig.pm`, `PVE::Tools::assert_if_modified`):
//! of two replicas writing at once, one wins.
//!
//! A run that ends gives the lease back by writing its line with `expires=0` (free to every flxp
//! at once), not by removing it: the next flxp to take the lease then knows whether another held
//! it since its own last turn, and a daemon reads the cluster again in full when so (another
//! flxp may have written what no cluster-wide answer shows, such as a maintenance mark).
//!
//! Clocks: the expiry is written and compared in Proxmox's clock (the `Date` header of its
//! answers), never this machine's. A holder stops acting when its own monotonic clock says
//! `renew-sent + ttl - margin` passed without a successful renewal; a contender takes over only
//! when Proxmox's clock is past `expires + margin`. The margin covers clock skew between the
//! cluster's nodes (each may answer the API). One exception: a holder that ran on this host, in
//! this pid space, and whose process is gone (killed) is taken over at once (see `holder.rs`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use flxp_pve::Pve;
use flxp_pve::types::{ClusterStatusEntry, NodeConfigUpdate};
use tokio::time::Instant;

mod holder;

pub use holder::{Process, holder_id};

/// Lease settings (the config's `[lease]` table).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseOptions {
    /// How long a written lease is valid (Proxmox clock).
    pub ttl: Duration,
    /// Allowance for clock skew between cluster nodes and for the request's time in flight.
    pub margin: Duration,
    /// This process's name in the lease, `host:pid:random`.
    pub holder: String,
    /// The flxp command holding it (`serve`, `daemon`, `evacuate`, ...), written beside the holder
    /// so that a refused run can say what to do (stop a daemon, or wait for a one-off run).
    pub command: Option<String>,
    /// When the lease is held: only while acting, or all the time.
    pub hold: LeaseHold,
}

impl Default for LeaseOptions {
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(30),
            margin: Duration::from_secs(5),
            holder: holder_id(),
            command: None,
            hold: LeaseHold::default(),
        }
    }
}

/// When a long-running flxp (`serve`, `daemon`) holds a zone's lease (the config's `[lease] hold`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LeaseHold {
    /// Only while it acts: taken on demand (see [`LeaseKeeper::demand`]), renewed while demanded,
    /// released when the last [`LeaseGuard`] drops; no lease calls at all between rounds.
    #[default]
    Acting,
    /// All the time, renewed every third of the TTL (a read and a write each) beside the rounds.
    Always,
}

impl LeaseOptions {
    /// Time between renewals: a third of the TTL, so one lost renewal does not lose the lease.
    pub fn renew_every(&self) -> Duration {
        (self.ttl / 3).max(Duration::from_millis(100))
    }
}

/// The expiry of a lease line given back: free to every flxp at once (see
/// [`LeaseKeeper::another_acted`] for why the line stays).
pub const FREE: i64 = 0;

/// One zone's lease as written in the notes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRecord {
    /// The zone.
    pub zone: String,
    /// Who holds it.
    pub holder: String,
    /// End of validity, epoch seconds in Proxmox's clock.
    pub expires: i64,
    /// The flxp command holding it, when written (`serve`, `daemon`, `evacuate`, ...).
    pub command: Option<String>,
    /// The pid space of the holder's pid, when written: lets a flxp on the same host take over
    /// at once from a holder that died (see [`Process::gone_holder`]).
    pub pidns: Option<String>,
}

impl LeaseRecord {
    /// The notes line.
    pub fn line(&self) -> String {
        let command = self
            .command
            .as_deref()
            .map(|c| format!(" command={c}"))
            .unwrap_or_default();
        let pidns = self
            .pidns
            .as_deref()
            .map(|p| format!(" pidns={p}"))
            .unwrap_or_default();
        format!(
            "<!-- flxp-lease zone={} holder={} expires={}{command}{pidns} -->",
            self.zone, self.holder, self.expires
        )
    }

    /// Reads one notes line; `None` for anything else.
    pub fn parse_line(line: &str) -> Option<Self> {
        let body = line
            .trim()
            .strip_prefix("<!--")?
            .strip_suffix("-->")?
            .trim();
        let mut words = body.split_whitespace();
        if words.next()? != "flxp-lease" {
            return None;
        }
        let (mut zone, mut holder, mut expires) = (None, None, None);
        let (mut command, mut pidns) = (None, None);
        for w in words {
            match w.split_once('=')? {
                ("zone", v) => zone = Some(v.to_owned()),
                ("holder", v) => holder = Some(v.to_owned()),
                ("expires", v) => expires = v.parse().ok(),
                ("command", v) if !v.is_empty() => command = Some(v.to_owned()),
                ("pidns", v) if !v.is_empty() => pidns = Some(v.to_owned()),
                _ => {}
            }
        }
        Some(Self {
            zone: zone?,
            holder: holder?,
            expires: expires?,
            command,
            pidns,
        })
    }
}

/// The cluster's lease in these notes, whatever zone name wrote it: two configs may name one
/// cluster differently, and both must see one lease. Of several lines (written by an older flxp,
/// one per zone name) the one valid longest counts, another holder's first on a tie.
pub fn find(notes: &str, me: &str) -> Option<LeaseRecord> {
    notes
        .lines()
        .filter_map(LeaseRecord::parse_line)
        .max_by_key(|r| (r.expires, r.holder != me))
}

/// The notes with the lease line (every one, whatever its zone name) replaced by `record`, or
/// removed when `None`; every other line is kept as it was.
pub fn rewrite(notes: &str, record: Option<&LeaseRecord>) -> String {
    let mut lines: Vec<String> = notes
        .lines()
        .filter(|l| LeaseRecord::parse_line(l).is_none())
        .map(str::to_owned)
        .collect();
    if let Some(r) = record {
        lines.push(r.line());
    }
    lines.join("\n")
}

/// Why a consolidation keeps the lease's node in service.
pub fn kept_because(node: &str, zone: &str) -> String {
    HoldsLease {
        node: node.to_owned(),
        zone: zone.to_owned(),
    }
    .to_string()
}

/// The node whose notes hold a zone's lease: a consolidation keeps it in service, because
/// switched off its notes are out of reach and no flxp could act on the zone again. Its
/// `Display` is the reason given for keeping it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldsLease {
    /// The node.
    pub node: String,
    /// The zone whose lease it holds.
    pub zone: String,
}

impl std::fmt::Display for HoldsLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} holds flxp's lease of zone {}: switched off, no flxp could act on the zone",
            self.node, self.zone
        )
    }
}

/// Why the lease could not be read or written.
// The Proxmox errors are fields named `error`, not `#[source]`: the message already holds them,
// and a chain printer (`{:#}`) would repeat them.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LeaseError {
    /// The cluster membership, which names the default lease node, could not be read.
    #[error("cannot read the cluster membership: {error}")]
    Membership {
        /// Proxmox's answer.
        error: flxp_pve::Error,
    },
    /// The cluster status names no node to keep the lease on.
    #[error("the cluster status lists no node")]
    NoNode,
    /// The lease node's config could not be read.
    #[error("cannot read the lease on node {node}: {error}")]
    Read {
        /// The lease node.
        node: String,
        /// Proxmox's answer.
        error: flxp_pve::Error,
    },
    /// Proxmox's answer had no `Date` header, so there is no clock to judge expiry by.
    #[error("Proxmox sent no Date header: no clock to judge the lease by")]
    NoClock,
    /// The lease node's config could not be written (down, refused, or a lost race).
    #[error("cannot write the lease on node {node}: {error}")]
    Write {
        /// The lease node.
        node: String,
        /// Proxmox's answer.
        error: flxp_pve::Error,
    },
    /// The API token lacks the privilege to read or write the lease node's notes.
    #[error(
        "the API token may not {action} the lease in node {node}'s notes: it needs {privilege} on \
         /nodes/{node} ({error}); grant it to the token's role, or turn the lease off with \
         `[lease] enabled = false` in flxp's config (then nothing keeps two flxp from acting on \
         the zone at once)"
    )]
    Denied {
        /// The lease node.
        node: String,
        /// `read` or `write`.
        action: &'static str,
        /// The privilege needed: `Sys.Audit` to read, `Sys.Modify` to write
        /// (pve-manager `PVE/API2/NodeConfig.pm`).
        privilege: &'static str,
        /// Proxmox's answer.
        error: flxp_pve::Error,
    },
}

impl LeaseError {
    /// A failed read of the lease node's config, naming the privilege when Proxmox refused it.
    fn read(node: &str, error: flxp_pve::Error) -> Self {
        Self::denied_or(node, "read", "Sys.Audit", error, |node, error| Self::Read {
            node,
            error,
        })
    }

    /// A failed write of the lease node's config, naming the privilege when Proxmox refused it.
    fn write(node: &str, error: flxp_pve::Error) -> Self {
        Self::denied_or(node, "write", "Sys.Modify", error, |node, error| {
            Self::Write { node, error }
        })
    }

    /// `Denied` when Proxmox refused the privilege (403), else what `other` makes of the error.
    fn denied_or(
        node: &str,
        action: &'static str,
        privilege: &'static str,
        error: flxp_pve::Error,
        other: impl FnOnce(String, flxp_pve::Error) -> Self,
    ) -> Self {
        let node = node.to_owned();
        if matches!(error.kind(), Some(flxp_pve::ApiErrorKind::PermissionDenied)) {
            Self::Denied {
                node,
                action,
                privilege,
                error,
            }
        } else {
            other(node, error)
        }
    }

    /// Whether the write lost a race with another writer (a stale digest): read again.
    fn lost_race(&self) -> bool {
        matches!(self, Self::Write { error, .. } if error.is_checksum_mismatch())
    }
}

/// What to do with the lease as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Ours: write a later expiry.
    Renew,
    /// Free or expired past the margin: try to take it.
    Take,
    /// Another holder's, still valid (or within the margin).
    Wait {
        /// The holder.
        holder: String,
        /// Its expiry, Proxmox clock.
        expires: i64,
        /// The flxp command holding it, when written.
        command: Option<String>,
    },
}

/// Judges the lease read from the notes at Proxmox time `now`.
pub fn judge(current: Option<&LeaseRecord>, me: &str, now: i64, margin: Duration) -> Verdict {
    match current {
        None => Verdict::Take,
        Some(r) if r.holder == me => Verdict::Renew,
        Some(r) if now > r.expires.saturating_add(secs(margin)) => Verdict::Take,
        Some(r) => Verdict::Wait {
            holder: r.holder.clone(),
            expires: r.expires,
            command: r.command.clone(),
        },
    }
}

/// Until when (this machine's monotonic clock) a renewal sent at `sent` lets the holder act.
pub fn valid_until(sent: Instant, ttl: Duration, margin: Duration) -> Instant {
    // Capped at a century: a monotonic clock cannot go much further, and that long is forever.
    const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
    sent + ttl.saturating_sub(margin).min(CENTURY)
}

/// What follows a holder's name when the lease names its command: ", running" and the command.
fn running(command: Option<&str>) -> String {
    command
        .map(|c| format!(", running `flxp {c}`"))
        .unwrap_or_default()
}

fn secs(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

/// What a lease attempt found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaseState {
    /// This process holds it.
    Held,
    /// Another process holds it.
    Standby {
        /// The holder.
        holder: String,
        /// Its expiry, epoch seconds in Proxmox's clock.
        expires: i64,
        /// The flxp command holding it, when written (`serve`, `daemon`, `evacuate`, ...).
        command: Option<String>,
        /// Proxmox's clock when the lease was read, epoch seconds.
        now: i64,
    },
    /// The lease could not be read or written (lease node down, refused, lost a race).
    Unknown(String),
}

/// Why this process may not act in a zone: it does not hold the zone's lease.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LeaseRefused {
    /// Another flxp holds it.
    #[error(
        "zone {zone} is held by another flxp ({holder}{}) until {expires} (Proxmox clock, epoch \
         seconds: {} s from now)",
        running(command.as_deref()),
        expires.saturating_sub(*now).max(0)
    )]
    HeldElsewhere {
        /// The zone.
        zone: String,
        /// The holder.
        holder: String,
        /// Its expiry, epoch seconds in Proxmox's clock.
        expires: i64,
        /// The flxp command holding it, when written.
        command: Option<String>,
        /// Proxmox's clock when the lease was read, epoch seconds.
        now: i64,
    },
    /// The lease could not be read or written.
    #[error("this flxp does not hold the lease of zone {zone}: {error}")]
    Unknown {
        /// The zone.
        zone: String,
        /// What went wrong.
        error: String,
    },
    /// Not taken yet.
    #[error("this flxp does not hold the lease of zone {zone}")]
    NotHeld {
        /// The zone.
        zone: String,
    },
}

#[derive(Default)]
struct KeeperState {
    valid_until: Option<Instant>,
    node: Option<String>,
    last: Option<LeaseState>,
    /// Live [`LeaseGuard`]s.
    demand: usize,
    /// Whether the renewal on demand runs (`hold = acting`).
    renewing: bool,
    /// Whether this process wrote the lease line and has not given it back since.
    written: bool,
    /// Whether this process ever wrote the lease line: its own line, given back, stays in the
    /// notes until another flxp writes its own.
    wrote_once: bool,
    /// Taken from a line another flxp wrote (or from none, where this process had left its
    /// own): another flxp may have acted since this process last held it. Cleared by
    /// [`LeaseKeeper::another_acted`].
    another: bool,
}

/// Takes and renews one zone's lease over its API (the I/O edge of this module).
pub struct LeaseKeeper {
    api: Pve,
    zone: String,
    node: Option<String>,
    options: LeaseOptions,
    /// This process, to recognise a holder on this host that died.
    process: Process,
    state: Mutex<KeeperState>,
    /// One attempt at a time: the renewal loop and a round's check both tick at start, and two
    /// writes with the same digest would fail one of them ("checksum mismatch").
    ticking: tokio::sync::Mutex<()>,
    /// Raised when the last [`LeaseGuard`] drops: the renewal on demand releases the lease.
    idle: tokio::sync::Notify,
}

/// The lease demanded for as long as this lives (see [`LeaseKeeper::demand`]): with
/// `hold = acting`, renewed while any guard lives and released after the last one drops.
#[must_use = "the lease is held only while the guard lives"]
pub struct LeaseGuard {
    keeper: Arc<LeaseKeeper>,
}

impl std::fmt::Debug for LeaseGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseGuard")
            .field("zone", &self.keeper.zone)
            .finish()
    }
}

impl LeaseGuard {
    /// Whether the lease is still valid by this process's clock (see [`LeaseKeeper::holding`]).
    pub fn holding(&self) -> bool {
        self.keeper.holding()
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        let last = {
            let mut st = self.keeper.lock();
            st.demand = st.demand.saturating_sub(1);
            st.demand == 0
        };
        if last {
            self.keeper.idle.notify_one();
        }
    }
}

impl std::fmt::Debug for LeaseKeeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseKeeper")
            .field("zone", &self.zone)
            .field("node", &self.node)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl LeaseKeeper {
    /// A keeper of `zone`'s lease on `node` (else the alphabetically first cluster member).
    pub fn new(api: Pve, zone: String, node: Option<String>, options: LeaseOptions) -> Self {
        Self {
            api,
            zone,
            node,
            options,
            process: Process::current(),
            state: Mutex::new(KeeperState::default()),
            ticking: tokio::sync::Mutex::new(()),
            idle: tokio::sync::Notify::new(),
        }
    }

    /// The settings.
    pub fn options(&self) -> &LeaseOptions {
        &self.options
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, KeeperState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether this process may act now: its last renewal is still valid by its own clock.
    pub fn holding(&self) -> bool {
        self.lock().valid_until.is_some_and(|t| Instant::now() < t)
    }

    /// The last attempt's outcome.
    pub fn last(&self) -> Option<LeaseState> {
        self.lock().last.clone()
    }

    /// The node whose notes hold the lease, with why a consolidation must keep it in service:
    /// switched off, its notes are out of reach and no replica could act on the zone again.
    pub async fn node_to_keep(&self) -> Result<HoldsLease, LeaseError> {
        let node = self.lease_node().await?;
        Ok(HoldsLease {
            node,
            zone: self.zone.clone(),
        })
    }

    /// The node holding the lease: configured, or the alphabetically first cluster member
    /// (offline ones included, so that every replica picks the same).
    async fn lease_node(&self) -> Result<String, LeaseError> {
        if let Some(n) = self.node.clone().or_else(|| self.lock().node.clone()) {
            return Ok(n);
        }
        let status = self
            .api
            .cluster_status()
            .await
            .map_err(|error| LeaseError::Membership { error })?;
        let first = status
            .iter()
            .filter_map(ClusterStatusEntry::node_name)
            .min()
            .ok_or(LeaseError::NoNode)?
            .to_owned();
        self.lock().node = Some(first.clone());
        Ok(first)
    }

    /// Takes or renews the lease once; logs changes of holder once.
    pub async fn tick(&self) -> LeaseState {
        let _one = self.ticking.lock().await;
        let sent = Instant::now();
        let state = match self.try_tick(sent).await {
            Ok(s) => s,
            Err(e) => LeaseState::Unknown(e.to_string()),
        };
        let mut st = self.lock();
        match &state {
            LeaseState::Held => {
                st.valid_until = Some(valid_until(sent, self.options.ttl, self.options.margin));
                st.written = true;
                if st.last != Some(LeaseState::Held) {
                    tracing::info!(zone = %self.zone, holder = %self.options.holder, "lease taken: this replica acts on the zone");
                }
            }
            LeaseState::Standby {
                holder,
                expires,
                command,
                ..
            } => {
                st.valid_until = None;
                let same =
                    matches!(&st.last, Some(LeaseState::Standby { holder: h, .. }) if h == holder);
                if !same {
                    let running = running(command.as_deref());
                    tracing::info!(
                        "standby: zone {} is held by {holder}{running} until {expires} (Proxmox clock, epoch seconds)",
                        self.zone
                    );
                }
            }
            LeaseState::Unknown(e) => {
                // Keep acting until the last renewal's validity ends; then stop (see `holding`).
                if !matches!(st.last, Some(LeaseState::Unknown(_))) {
                    tracing::warn!(zone = %self.zone, error = %e, "cannot renew or take the lease");
                }
            }
        }
        st.last = Some(state.clone());
        state
    }

    async fn try_tick(&self, _sent: Instant) -> Result<LeaseState, LeaseError> {
        match self.attempt().await {
            // Another writer came first (two flxp starting at the same moment): read again, so
            // that the answer names the winner instead of a checksum error.
            Err(e) if e.lost_race() => {
                tracing::debug!(zone = %self.zone, "lost a race for the lease: reading it again");
                self.attempt().await
            }
            other => other,
        }
    }

    /// Reads the lease once and takes, renews or reports it.
    async fn attempt(&self) -> Result<LeaseState, LeaseError> {
        let node = self.lease_node().await?;
        let cfg = self
            .api
            .node_config(&node)
            .await
            .map_err(|error| LeaseError::read(&node, error))?;
        let now = self.api.server_time().ok_or(LeaseError::NoClock)?;
        let notes = cfg.description.unwrap_or_default();
        let current = find(&notes, &self.options.holder);
        let mut verdict = judge(
            current.as_ref(),
            &self.options.holder,
            now,
            self.options.margin,
        );
        // A holder on this host that was killed (`kill -9`, a crash) cannot renew: waiting for
        // its lease to expire would only keep the zone idle for ttl + margin.
        if let Verdict::Wait { holder, .. } = &verdict {
            if let Some(pid) = self.gone(current.as_ref()) {
                tracing::warn!(
                    zone = %self.zone,
                    holder = %holder,
                    pid,
                    "the lease's holder, process {pid} on this host, is gone: taking the lease over"
                );
                verdict = Verdict::Take;
            }
        }
        match verdict {
            Verdict::Wait {
                holder,
                expires,
                command,
            } => Ok(LeaseState::Standby {
                holder,
                expires,
                command,
                now,
            }),
            Verdict::Renew | Verdict::Take => {
                let record = LeaseRecord {
                    zone: self.zone.clone(),
                    holder: self.options.holder.clone(),
                    expires: now.saturating_add(secs(self.options.ttl).max(1)),
                    command: self.options.command.clone(),
                    pidns: self.process.pidns.clone(),
                };
                self.write(&node, &notes, Some(&record), cfg.digest).await?;
                // A line given back stays (see `give_back`), so a line of another holder, or
                // none where this process had left its own, means another flxp held the lease
                // since: it may have written (a maintenance mark) what this one's reads miss.
                {
                    let mut st = self.lock();
                    let another = match &current {
                        Some(r) => r.holder != self.options.holder,
                        None => st.wrote_once,
                    };
                    st.another |= another;
                    st.wrote_once = true;
                }
                Ok(LeaseState::Held)
            }
        }
    }

    /// The pid of the lease's holder when it ran on this host and is gone (see
    /// [`Process::gone_holder`]).
    fn gone(&self, current: Option<&LeaseRecord>) -> Option<u32> {
        let r = current?;
        self.process
            .gone_holder(&r.holder, r.pidns.as_deref(), holder::alive)
    }

    async fn write(
        &self,
        node: &str,
        notes: &str,
        record: Option<&LeaseRecord>,
        digest: Option<String>,
    ) -> Result<(), LeaseError> {
        let update = NodeConfigUpdate {
            description: Some(rewrite(notes, record)),
            delete: None,
            digest,
        };
        self.api
            .update_node_config(node, &update)
            .await
            .map_err(|error| LeaseError::write(node, error))
    }

    /// Gives the lease up if held (on a clean stop), so another replica takes over at once.
    pub async fn release(&self) {
        let _one = self.ticking.lock().await;
        self.lock().valid_until = None;
        if self.give_back().await {
            tracing::info!(zone = %self.zone, "lease released");
        }
    }

    /// Whether another flxp held the lease between this process's last holding and its latest
    /// taking (the line it took was another holder's); answered once: the next call says `false` until
    /// another such taking. A daemon reads the whole cluster again then: what that flxp wrote
    /// (a maintenance mark in a node's notes) is in no cluster-wide answer.
    pub fn another_acted(&self) -> bool {
        std::mem::take(&mut self.lock().another)
    }

    /// Gives this process's lease line back with compare-and-swap: the line stays, expired
    /// (`expires=0`, free to every flxp, older ones too), so that the next flxp to take the
    /// lease knows who held it last. When that fails, the lease lapses at its expiry. Whether
    /// it was given back.
    async fn give_back(&self) -> bool {
        self.lock().written = false;
        let Ok(node) = self.lease_node().await else {
            return false;
        };
        let Ok(cfg) = self.api.node_config(&node).await else {
            return false;
        };
        let notes = cfg.description.unwrap_or_default();
        let Some(mine) = find(&notes, &self.options.holder)
            .filter(|r| r.holder == self.options.holder && r.expires != FREE)
        else {
            return false;
        };
        let free = LeaseRecord {
            expires: FREE,
            ..mine
        };
        match self.write(&node, &notes, Some(&free), cfg.digest).await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(zone = %self.zone, error = %e, "cannot release the lease");
                false
            }
        }
    }

    /// Takes the lease for the time the returned guard lives, or refuses naming the holder. With
    /// `hold = acting` the first demand reads and writes the lease (unless still valid), a
    /// renewal follows every third of the TTL while any guard lives, and the lease is released
    /// once the last guard drops; with `hold = always`, [`LeaseKeeper::keep`] renews it
    /// beside, and a demand only checks it (taking it when not held).
    pub async fn demand(self: &Arc<Self>) -> Result<LeaseGuard, LeaseRefused> {
        let (holding, spawn) = {
            let mut st = self.lock();
            st.demand += 1;
            let spawn = self.options.hold == LeaseHold::Acting && !st.renewing;
            st.renewing |= spawn;
            (st.valid_until.is_some_and(|t| Instant::now() < t), spawn)
        };
        // Made before anything can fail, so that every way out gives the demand back.
        let guard = LeaseGuard {
            keeper: Arc::clone(self),
        };
        if spawn {
            tokio::spawn(Arc::clone(self).renew_while_demanded());
        }
        if !holding {
            self.tick().await;
        }
        if self.holding() {
            Ok(guard)
        } else {
            Err(self.refused())
        }
    }

    /// With `hold = acting`: renews while any guard lives, releases when none is left, and ends.
    async fn renew_while_demanded(self: Arc<Self>) {
        let mut next = Instant::now() + self.options.renew_every();
        loop {
            tokio::select! {
                () = tokio::time::sleep_until(next) => {}
                () = self.idle.notified() => {}
            }
            if self.lock().demand > 0 {
                if Instant::now() >= next {
                    self.tick().await;
                    next = Instant::now() + self.options.renew_every();
                }
                continue;
            }
            self.release_idle().await;
            let mut st = self.lock();
            if st.demand == 0 {
                st.renewing = false;
                return;
            }
            // Demanded again while releasing: that demand took the lease anew.
            next = Instant::now() + self.options.renew_every();
        }
    }

    /// Releases the lease unless it was demanded again meanwhile (then its holder keeps it).
    async fn release_idle(&self) {
        let _one = self.ticking.lock().await;
        {
            let mut st = self.lock();
            if st.demand > 0 || !st.written {
                return;
            }
            st.valid_until = None;
        }
        if self.give_back().await {
            tracing::debug!(zone = %self.zone, "lease released: this flxp acts no more for now");
        }
    }

    /// Renews the lease every third of its TTL, for as long as the future is polled (drop it to
    /// stop); `taken` is called whenever the lease is (re)gained, so a waiting round starts at once.
    pub async fn keep(&self, taken: impl Fn()) {
        loop {
            let was = self.holding();
            if self.tick().await == LeaseState::Held && !was {
                taken();
            }
            tokio::time::sleep(self.options.renew_every()).await;
        }
    }

    /// Why this process may not act now, naming the holder when known.
    pub fn refusal(&self) -> String {
        self.refused().to_string()
    }

    /// Why this process may not act now, as a value.
    pub fn refused(&self) -> LeaseRefused {
        let zone = self.zone.clone();
        match self.last() {
            Some(LeaseState::Standby {
                holder,
                expires,
                command,
                now,
            }) => LeaseRefused::HeldElsewhere {
                zone,
                holder,
                expires,
                command,
                now,
            },
            Some(LeaseState::Unknown(error)) => LeaseRefused::Unknown { zone, error },
            _ => LeaseRefused::NotHeld { zone },
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
