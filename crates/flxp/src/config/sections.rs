//! The tables of the config file, as serde reads them. Keys are kebab-case; unknown keys are
//! errors; sizes are `"4GiB"`-style strings or byte counts.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Deserializer};

/// A size in bytes, written `"4GiB"`, `"4G"`, `"4096M"` or as a byte count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size(pub u64);

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Bytes(u64),
            Text(String),
        }
        match Raw::deserialize(d).map_err(|_| {
            serde::de::Error::custom("expected a size such as \"4GiB\" or a byte count")
        })? {
            Raw::Bytes(b) => Ok(Size(b)),
            Raw::Text(t) => crate::size::parse(&t)
                .map(Size)
                .map_err(serde::de::Error::custom),
        }
    }
}

/// `[placement]`: the filters' knobs and the default policy.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct PlacementSection {
    /// Default policy name.
    pub policy: Option<String>,
    /// Memory kept free on every node.
    pub reserve: Option<Size>,
    /// Per-node reserves, by node name.
    pub node_reserve: BTreeMap<String, Size>,
    /// Cap on committed memory as a ratio of node memory.
    pub max_memory_commit: Option<f64>,
    /// Cap on committed vCPUs as a ratio of node CPUs.
    pub max_vcpu_ratio: Option<f64>,
}

/// `[migration]`: limits on carrying out plans.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct MigrationSection {
    /// Migrations running at once in a zone.
    pub parallel: u32,
    /// Migrations running at once into one node.
    pub per_node_in: u32,
    /// Migrations running at once out of one node.
    pub per_node_out: u32,
    /// Give up following a migration after this many seconds.
    pub timeout_secs: u64,
    /// Seconds between task status polls (fractions allowed: a simulator run faster than real
    /// time needs them).
    pub poll_secs: f64,
    /// Live-migrate local disks too (`with-local-disks`) when the precondition check asks for it.
    pub with_local_disks: bool,
    /// Most replans in one round: when the cluster keeps changing under the plan, the round ends
    /// after this many and the next one starts afresh (0: never replan, stop at the first change).
    pub max_replans: u32,
    /// On a stop (Ctrl-C, SIGTERM), how many seconds running migrations are still followed before
    /// flxp exits; Proxmox carries on with any still running.
    pub drain_timeout_secs: u64,
}

impl Default for MigrationSection {
    fn default() -> Self {
        Self {
            parallel: 2,
            per_node_in: 1,
            per_node_out: 1,
            timeout_secs: 3600,
            poll_secs: 2.0,
            with_local_disks: true,
            max_replans: 10,
            drain_timeout_secs: 600,
        }
    }
}

/// `[daemon]`: the periodic loop.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct DaemonSection {
    /// Seconds between rounds.
    pub interval_secs: u64,
    /// Zones to manage; empty means every zone of the file.
    pub zones: Vec<String>,
    /// Rebalance when the trigger says so.
    pub rebalance: bool,
    /// Evacuate nodes in maintenance.
    pub evacuate: bool,
    /// Longest time between full reads of a zone (node notes, RRD); in between, reads refresh
    /// guests, tasks and HA state only, unless something unexpected changed.
    pub full_read_secs: u64,
    /// Time constant, seconds, of the CPU averages the rounds plan on (0: instant figures).
    pub smoothing_secs: u64,
}

impl Default for DaemonSection {
    fn default() -> Self {
        Self {
            interval_secs: 300,
            zones: Vec::new(),
            rebalance: true,
            evacuate: true,
            full_read_secs: 3600,
            smoothing_secs: 1800,
        }
    }
}

/// `[lease]`: one actor per zone, through a lease in the lease node's notes; on by default.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct LeaseSection {
    /// Act in a zone only while holding its lease (needs `Sys.Modify` on the lease node). On by
    /// default: off, two flxp acting at once can each break a rule the other's moves respect.
    pub enabled: bool,
    /// Seconds a lease is valid without renewal (renewed every third of it).
    pub ttl_secs: u64,
    /// Seconds allowed for clock skew between the cluster's nodes.
    pub margin_secs: u64,
    /// When `serve` and `daemon` hold the lease: `acting` (only while a round or an API action
    /// acts, the default) or `always` (renewed every third of the TTL, between rounds too).
    pub hold: LeaseHold,
}

/// `[lease] hold`: when a long-running flxp holds a zone's lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LeaseHold {
    /// Only while acting: no lease calls between rounds.
    #[default]
    Acting,
    /// All the time: a read and a write of the lease node's config every third of the TTL.
    Always,
}

impl From<LeaseHold> for flxp_engine::LeaseHold {
    fn from(h: LeaseHold) -> Self {
        match h {
            LeaseHold::Acting => Self::Acting,
            LeaseHold::Always => Self::Always,
        }
    }
}

impl Default for LeaseSection {
    fn default() -> Self {
        Self {
            enabled: true,
            ttl_secs: 30,
            margin_secs: 5,
            hold: LeaseHold::default(),
        }
    }
}

/// Reads an inline secret through [`flxp_pve::Secret`], whose errors never show the value.
fn inline_secret<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let secret = flxp_pve::Secret::deserialize(d)?;
    Ok(Some(secret.expose().to_owned()))
}

/// What an API token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Read and plan: queries and dry runs.
    Viewer,
    /// Also carry out plans, evacuate and create VMs. A token without a role is an operator, as
    /// every token was before roles existed.
    #[default]
    Operator,
}

impl Role {
    /// The config and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Viewer => "viewer",
            Self::Operator => "operator",
        }
    }
}

/// `[api].tokens` entry: a secret given inline, from an environment variable, or from a file
/// (exactly one), and its role.
#[derive(Clone, Default, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct ApiToken {
    /// Inline value.
    #[serde(deserialize_with = "inline_secret")]
    pub value: Option<String>,
    /// Environment variable holding it.
    pub env: Option<String>,
    /// File holding it (trailing newline ignored).
    pub file: Option<PathBuf>,
    /// What the token may do (`operator` when absent).
    pub role: Role,
    /// The name the audit log records for it (`api.tokens[<i>]` when absent): never the secret.
    pub name: Option<String>,
}

impl std::fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiToken")
            .field("value", &self.value.as_ref().map(|_| "<redacted>"))
            .field("env", &self.env)
            .field("file", &self.file)
            .field("role", &self.role)
            .field("name", &self.name)
            .finish()
    }
}

/// `[api]`: the GraphQL/HTTP server of `flxp serve`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct ApiSection {
    /// Listen address (`127.0.0.1:8080` by default).
    pub listen: Option<String>,
    /// Bearer tokens accepted by the API, each with its role.
    pub tokens: Vec<ApiToken>,
    /// `/readyz` counts a zone as reachable when Proxmox answered within this many seconds; it
    /// is probed at a quarter of that (default 60).
    pub ready_secs: Option<u64>,
}

/// `[overrides.<zone>.<node>]`: what the config says about a node instead of its notes.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct NodeOverride {
    /// Replaces the node's notes (flxp tokens: labels, taints, prefer-no, maintenance).
    pub notes: Option<String>,
    /// Puts the node in maintenance.
    pub maintenance: bool,
}

/// `[compute-profiles.<id>]`: a VM size.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct ComputeProfile {
    /// vCPUs.
    pub cores: u32,
    /// Memory.
    pub memory: Size,
    /// Sockets (default 1).
    #[serde(default)]
    pub sockets: Option<u32>,
}

/// `[storage-profiles.<id>]`: where and how big the boot disk is.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct StorageProfile {
    /// Proxmox storage id for the VM's disks (`ceph`, `local-lvm`).
    pub storage: String,
    /// Boot disk size (grown to this after the clone).
    pub disk: Size,
}

/// Where an image's template lives in one zone.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct ImageZone {
    /// Template VMID on shared storage (cloned with `target`).
    pub template: Option<u32>,
    /// Per-node template VMIDs, for templates on local storage.
    pub nodes: BTreeMap<String, u32>,
}

/// `[images.<id>]`: a template to clone.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct Image {
    /// Template VMID used in every zone that does not say otherwise.
    pub template: Option<u32>,
    /// Per-zone templates.
    pub zones: BTreeMap<String, ImageZone>,
}

/// `[networks.<id>]`: a network a VM interface can join.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Network {
    /// Linux bridge (`vmbr0`).
    pub bridge: String,
    /// VLAN tag, if any.
    #[serde(default)]
    pub vlan: Option<u16>,
    /// NIC model (default `virtio`).
    #[serde(default)]
    pub model: Option<String>,
    /// Proxmox firewall on the interface.
    #[serde(default)]
    pub firewall: bool,
}

/// `[create-vm]`: how `createVM` carries out its Proxmox steps.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct CreateVmSection {
    /// Milliseconds between task status polls (clone, start, cleanup).
    pub poll_ms: u64,
    /// Give up following one task after this many seconds.
    pub timeout_secs: u64,
    /// Always make full clones, never linked ones.
    pub full_clone: bool,
    /// Seconds a created VM's reservation is kept when no snapshot shows it running (a VM stopped
    /// at once); normally the first snapshot that shows it ends the reservation.
    pub reservation_ttl_secs: u64,
    /// Seconds after which a VM still tagged `flxp.creating` with no creation in flight here is
    /// a creation cut short, for the daemon's cleanup.
    pub stale_after_secs: u64,
    /// What the daemon does with such a VM: `remove` (delete it if stopped, untag it if
    /// running) or `warn` (log only).
    pub stale_action: flxp_engine::StaleAction,
}

impl Default for CreateVmSection {
    fn default() -> Self {
        Self {
            poll_ms: 1000,
            timeout_secs: 900,
            full_clone: false,
            reservation_ttl_secs: 300,
            stale_after_secs: 3600,
            stale_action: flxp_engine::StaleAction::Remove,
        }
    }
}

impl CreateVmSection {
    /// The daemon's stale-marker options.
    pub fn stale(&self) -> flxp_engine::StaleOptions {
        flxp_engine::StaleOptions {
            after: std::time::Duration::from_secs(self.stale_after_secs),
            action: self.stale_action,
        }
    }
}

/// `[[plugin]]`: an external filter, scorer or balancing method, reached by a program (`command`,
/// no shell) or an HTTP(S) URL (`url`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct PluginSection {
    /// Its name in policies, `--method` and explanations.
    pub name: String,
    /// `filter`, `score` or `balance`.
    pub kind: flxp_core::plugin::PluginKind,
    /// The program and its arguments.
    #[serde(default)]
    pub command: Option<Vec<String>>,
    /// The URL the request is POSTed to.
    #[serde(default)]
    pub url: Option<String>,
    /// Milliseconds a call may take before it is abandoned (the program killed).
    #[serde(default = "plugin_timeout_ms")]
    pub timeout_ms: u64,
    /// Largest answer accepted, in bytes.
    #[serde(default = "plugin_max_answer_bytes")]
    pub max_answer_bytes: u64,
    /// `ignore` (decide without it, with a warning) or `fail` (refuse the decision).
    #[serde(default)]
    pub on_failure: flxp_core::plugin::OnFailure,
}

impl PluginSection {
    /// The plugin as the core knows it.
    pub fn spec(&self) -> flxp_core::plugin::PluginSpec {
        flxp_core::plugin::PluginSpec::new(&self.name, self.kind, self.on_failure)
    }
}

fn plugin_timeout_ms() -> u64 {
    2000
}

fn plugin_max_answer_bytes() -> u64 {
    1 << 20
}

/// `[rolling]`: how `flxp rolling`, and the dashboard's and the API's rolling maintenance, take
/// nodes through maintenance.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct RollingSection {
    /// A command run once a node is empty, split on white space, with the node's name as its
    /// last argument (exit 0 done, 10 nothing to do); `flxp rolling --hook` overrides it.
    pub hook: Option<String>,
    /// Most nodes out at a time, while quorum, room, N+1 headroom and the rules allow (fewer
    /// otherwise); `flxp rolling --parallel` overrides it.
    pub parallel: usize,
    /// Longest wait, seconds, for a rebooted node to be online and the cluster quorate.
    pub boot_timeout_secs: u64,
}

impl Default for RollingSection {
    fn default() -> Self {
        Self {
            hook: None,
            parallel: 1,
            boot_timeout_secs: 900,
        }
    }
}

impl RollingSection {
    /// The hook as program and arguments; `None` when none is set or it is only white space.
    pub fn hook(&self) -> Option<flxp_engine::rolling::Hook> {
        let words: Vec<String> = self
            .hook
            .as_deref()?
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        (!words.is_empty()).then_some(flxp_engine::rolling::Hook { command: words })
    }
}

/// `[consolidate]`: the limits of `flxp consolidate` and whether emptied nodes are switched off.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct ConsolidateSection {
    /// Highest share of a remaining node's memory in use (0..=1).
    pub max_memory: f64,
    /// Highest share of a remaining node's CPUs in use (0..=1).
    pub max_cpu: f64,
    /// Fewest nodes left in service, for HA.
    pub min_nodes: usize,
    /// Keep N+1 headroom (any one remaining node may fail).
    pub headroom: bool,
    /// Switch emptied nodes off through the API (`Sys.PowerMgmt`).
    pub shutdown: bool,
    /// The daemon consolidates and wakes nodes on its own (power saving).
    pub enabled: bool,
    /// The daemon consolidates when the zone's load stays below this share (0..1).
    pub consolidate_below: f64,
    /// The daemon wakes a node flxp switched off when the zone's load is above this share.
    pub wake_above: f64,
    /// Least seconds between two power changes, and how long the load must stay low first.
    pub min_interval_secs: u64,
    /// Seconds a woken node may take to come online before Wake-on-LAN is sent again.
    pub wake_timeout_secs: u64,
    /// Seconds of planning work beyond the default budget (large clusters; 0: the default).
    pub effort_secs: f64,
}

impl Default for ConsolidateSection {
    fn default() -> Self {
        let o = flxp_core::consolidate::ConsolidateOptions::default();
        Self {
            max_memory: o.max_memory,
            max_cpu: o.max_cpu,
            min_nodes: o.min_nodes,
            headroom: o.headroom,
            shutdown: false,
            enabled: false,
            consolidate_below: 0.4,
            wake_above: 0.7,
            min_interval_secs: 1800,
            wake_timeout_secs: 900,
            effort_secs: o.effort_secs,
        }
    }
}

impl ConsolidateSection {
    /// The planner's limits.
    pub fn options(&self) -> flxp_core::consolidate::ConsolidateOptions {
        flxp_core::consolidate::ConsolidateOptions {
            max_memory: self.max_memory,
            max_cpu: self.max_cpu,
            min_nodes: self.min_nodes,
            headroom: self.headroom,
            effort_secs: self.effort_secs,
            ..flxp_core::consolidate::ConsolidateOptions::default()
        }
    }

    /// The daemon's power saving, when `enabled`.
    pub fn auto(&self) -> Option<flxp_engine::AutoConsolidate> {
        self.enabled.then(|| flxp_engine::AutoConsolidate {
            options: self.options(),
            shutdown: self.shutdown,
            consolidate_below: self.consolidate_below,
            wake_above: self.wake_above,
            min_interval: std::time::Duration::from_secs(self.min_interval_secs),
            wake_timeout: std::time::Duration::from_secs(self.wake_timeout_secs),
        })
    }

    /// Checks the auto mode's levels: the dotted key and what is wrong.
    pub fn check_auto(&self) -> Result<(), (String, String)> {
        for (key, v) in [
            ("consolidate-below", self.consolidate_below),
            ("wake-above", self.wake_above),
        ] {
            if !v.is_finite() || v <= 0.0 || v > 1.0 {
                return Err((
                    format!("consolidate.{key}"),
                    format!("must be a share of the zone above 0 and at most 1, got {v}"),
                ));
            }
        }
        if self.consolidate_below >= self.wake_above {
            return Err((
                "consolidate.wake-above".into(),
                format!(
                    "must be above consolidate-below ({}), or nodes would be woken and switched \
                     off in turn",
                    self.consolidate_below
                ),
            ));
        }
        if self.wake_timeout_secs == 0 {
            return Err((
                "consolidate.wake-timeout-secs".into(),
                "must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

/// `[audit]`: the append-only log of what the API was asked to do.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, rename_all = "kebab-case", deny_unknown_fields)]
pub struct AuditSection {
    /// Keep the log (on by default).
    pub enabled: bool,
    /// The file; by default `audit.jsonl` in systemd's `$STATE_DIRECTORY` (`/var/lib/flxp`),
    /// else in `$XDG_STATE_HOME/flxp` or `~/.local/state/flxp`.
    pub path: Option<PathBuf>,
    /// The file is rotated before it grows past this size.
    pub max_size: Size,
    /// Rotated files kept (`audit.jsonl.1` is the newest).
    pub keep: u32,
}

impl Default for AuditSection {
    fn default() -> Self {
        Self {
            enabled: true,
            path: None,
            max_size: Size(10 << 20),
            keep: 5,
        }
    }
}

/// A `[[webhook]]`: where events are POSTed as JSON. Its `Debug` hides the URL's path and the
/// header values: both often carry a secret (a chat system's hook key, an `Authorization`).
#[derive(Clone, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct WebhookSection {
    /// `http://` or `https://` URL.
    pub url: String,
    /// Event names sent there (`migration.failed`, ...); all events when empty.
    #[serde(default)]
    pub events: Vec<String>,
    /// Extra request headers (`Authorization = "Bearer ..."`); never logged.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Seconds one attempt may take.
    #[serde(default = "webhook_timeout_secs")]
    pub timeout_secs: u64,
    /// Attempts after the first one failed.
    #[serde(default = "webhook_retries")]
    pub retries: u32,
    /// Wait before the first retry, milliseconds; doubled for each further one.
    #[serde(default = "webhook_backoff_ms")]
    pub backoff_ms: u64,
    /// Events waiting to be sent; more are dropped with a warning.
    #[serde(default = "webhook_queue")]
    pub queue: usize,
}

fn webhook_timeout_secs() -> u64 {
    10
}
fn webhook_retries() -> u32 {
    3
}
fn webhook_backoff_ms() -> u64 {
    1000
}
fn webhook_queue() -> usize {
    100
}

impl WebhookSection {
    /// The URL without its path, query or credentials: what logs may show.
    pub fn shown_url(&self) -> String {
        match reqwest::Url::parse(&self.url) {
            Ok(u) => format!(
                "{}://{}{}",
                u.scheme(),
                u.host_str().unwrap_or(""),
                u.port().map(|p| format!(":{p}")).unwrap_or_default()
            ),
            Err(_) => "(invalid URL)".to_owned(),
        }
    }
}

impl std::fmt::Debug for WebhookSection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookSection")
            .field("url", &self.shown_url())
            .field("events", &self.events)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("timeout_secs", &self.timeout_secs)
            .field("retries", &self.retries)
            .finish_non_exhaustive()
    }
}
