//! GraphQL object and input types. Objects are built from the core's decisions, which stay the
//! source of truth: plans and placements also carry their whole JSON document (`document`), the
//! same one `flxp balance --json` and `flxp place --json` print (Contract 3).
//!
//! Sizes are bytes. They pass 2^31, GraphQL's `Int` range, on any real node; async-graphql writes
//! them as plain JSON numbers, exact up to 2^53 in every JSON client.

use async_graphql::{ComplexObject, ID, InputObject, Json, SimpleObject};
use flxp_core::balance::{NodeFigures, Plan, Registry};
use flxp_core::constraints::Violation;
use flxp_core::left_running::LeftRunning;
use flxp_core::placement::Placement;
use flxp_core::status::NodeSummary;
use flxp_core::{Cluster, State};
use flxp_engine::ExecutionReport;

use super::ApiError;

/// A node as `createVM` answers it.
#[derive(SimpleObject, Debug, Clone)]
pub struct Host {
    /// The node's name (nodes have no other id in Proxmox).
    pub id: ID,
    /// The node's name.
    pub name: String,
}

/// A VM created by `createVM`.
#[derive(SimpleObject, Debug, Clone)]
#[graphql(name = "VM")]
pub struct Vm {
    /// The VMID.
    pub id: ID,
    /// Its name.
    pub name: String,
    /// The node it runs on.
    pub host: Host,
    /// The zone.
    pub zone: String,
    /// What the placement warned about (an unknown `flxp.` tag, a rule a named host breaks).
    pub warnings: Vec<String>,
}

/// A configured zone.
#[derive(SimpleObject, Debug, Clone)]
pub struct ZoneInfo {
    /// Its name.
    pub name: String,
    /// Whether Proxmox answered within the readiness window.
    pub reachable: bool,
    /// Whether it is the built-in simulated zone.
    pub simulated: bool,
    /// Whether `power` may switch its nodes off and wake them (`[consolidate] shutdown = true`).
    pub power: bool,
}

/// What `power` does to a node.
#[derive(async_graphql::Enum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerAction {
    /// Switch it off: only an empty node in maintenance, with more than half the nodes online.
    Shutdown,
    /// Send it Wake-on-LAN.
    Wake,
}

/// A node with its usage and the rules broken on it.
#[derive(SimpleObject, Debug, Clone)]
pub struct Node {
    /// The node's name.
    pub id: ID,
    /// The node's name.
    pub name: String,
    /// `online`, `offline`, `unknown`.
    pub status: String,
    /// Why it is in maintenance; empty when it is not.
    pub maintenance: Vec<String>,
    /// Its memory and CPU, as `flxp status --json` gives them (with reservations of VMs being
    /// created).
    #[graphql(flatten)]
    pub figures: NodeFigures,
    /// Running guests.
    pub running: u32,
    /// All guests on it.
    pub guests: u32,
    /// Labels from its notes.
    pub labels: Vec<String>,
    /// Taints from its notes.
    pub taints: Vec<String>,
    /// Soft taints (`flxp.prefer-no.<taint>`): avoided unless tolerated, never refused.
    pub soft_taints: Vec<String>,
    /// Hard rules broken on it.
    pub violations: Vec<Violation>,
    /// Whether it is safe to reboot, for a node in maintenance; null for the others.
    pub maintenance_state: Option<MaintenanceState>,
}

/// Whether a node in maintenance is safe to reboot, from what it holds.
#[derive(SimpleObject, Debug, Clone)]
pub struct MaintenanceState {
    /// `empty`, `stopped-only` or `running`.
    pub state: String,
    /// Whether no guest runs there: rebooting stops none.
    pub safe_to_reboot: bool,
    /// In words: `empty, safe to reboot`, `2 running guests still here, not safe to reboot`.
    pub summary: String,
    /// Guests there that do not run (stopped ones and templates) when only those are left.
    pub stopped: u32,
    /// The guests still running there, each with why.
    pub running: Vec<LeftRunning>,
}

impl From<&flxp_core::left_running::MaintenanceState> for MaintenanceState {
    fn from(s: &flxp_core::left_running::MaintenanceState) -> Self {
        use flxp_core::left_running::MaintenanceState as S;
        Self {
            state: s.as_str().to_owned(),
            safe_to_reboot: s.safe_to_reboot(),
            summary: s.to_string(),
            stopped: match s {
                S::StoppedOnly { stopped } => *stopped,
                _ => 0,
            },
            running: s.running().to_vec(),
        }
    }
}

impl Node {
    /// From the status report's line and the report's violations.
    pub fn new(
        n: &NodeSummary,
        violations: &[flxp_core::constraints::Violation],
        cluster: &Cluster,
    ) -> Self {
        Self {
            id: ID(n.node.clone()),
            name: n.node.clone(),
            status: n.status.clone(),
            maintenance: n.maintenance.clone(),
            figures: n.figures.clone(),
            running: n.running,
            guests: u32::try_from(n.guests).unwrap_or(u32::MAX),
            labels: n.labels.clone(),
            taints: n.taints.clone(),
            soft_taints: cluster
                .node_idx(&n.node)
                .map(|i| cluster.node(i).prefer_no.iter().cloned().collect())
                .unwrap_or_default(),
            violations: violations
                .iter()
                .filter(|v| v.node == n.node)
                .cloned()
                .collect(),
            maintenance_state: n.maintenance_state.as_ref().map(MaintenanceState::from),
        }
    }
}

/// A guest (VM or container).
#[derive(SimpleObject, Debug, Clone)]
pub struct Guest {
    /// The VMID.
    pub id: ID,
    /// The VMID.
    pub vmid: u32,
    /// Its name.
    pub name: String,
    /// `qemu` or `lxc`.
    #[graphql(name = "type")]
    pub kind: String,
    /// The node it is on.
    pub node: String,
    /// Status word (`running`, `stopped`, ...).
    pub status: String,
    /// Whether it is a template.
    pub template: bool,
    /// vCPUs.
    pub maxcpu: f64,
    /// CPU load as a fraction of its vCPUs.
    pub cpu: f64,
    /// Configured memory, bytes.
    pub maxmem: u64,
    /// Used memory, bytes.
    pub mem: u64,
    /// Tags.
    pub tags: Vec<String>,
    /// Config lock, if any.
    pub lock: Option<String>,
    /// Whether Proxmox HA manages it.
    pub ha_managed: bool,
}

impl Guest {
    /// Every guest of a cluster, by VMID, where the state has it.
    pub fn all(cluster: &Cluster, state: &State) -> Vec<Self> {
        cluster
            .guest_indexes()
            .map(|i| {
                let g = cluster.guest(i);
                Self {
                    id: ID(g.vmid.to_string()),
                    vmid: g.vmid,
                    name: g.name.clone(),
                    kind: g.kind.as_str().to_owned(),
                    node: cluster.node(state.location(i)).name.clone(),
                    status: g.status.clone(),
                    template: g.template,
                    maxcpu: g.maxcpu,
                    cpu: g.cpu,
                    maxmem: g.maxmem,
                    mem: g.mem,
                    tags: g.tags.clone(),
                    lock: g.lock.clone(),
                    ha_managed: g.ha_managed,
                }
            })
            .collect()
    }
}

/// What a new VM needs, for the `placement` query: a compute profile or memory and cores.
#[derive(InputObject, Debug, Clone, Default)]
pub struct PlacementInput {
    /// A compute profile (sets memory and cores).
    pub compute_profile: Option<String>,
    /// Memory, e.g. `"4GiB"` or a byte count as text (instead of a profile).
    pub memory: Option<String>,
    /// vCPUs (instead of a profile): above 0, a fraction such as 0.5 allowed.
    // f64, not u32: a fraction, a negative or an oversized count then reaches
    // `placement_request`, whose error names the field.
    pub cores: Option<f64>,
    /// Tags the VM would carry (flxp rules among them); none when absent or null.
    // Option, not a default: a nullable list must take `null` as well as an absent field.
    pub tags: Option<Vec<String>>,
    /// A node to check instead of choosing one.
    pub host: Option<String>,
    /// Placement policy; the configured default when absent.
    pub policy: Option<String>,
}

/// Where a new VM would go, and why.
#[derive(SimpleObject, Debug, Clone)]
#[graphql(complex)]
pub struct PlacementResult {
    /// The core's decision as shown: its fields are this object's, the candidates only with
    /// `explain` or when no node fits.
    #[graphql(flatten)]
    pub shown: Placement,
    /// The core's whole decision, for `document`.
    #[graphql(skip)]
    pub decision: Placement,
}

#[ComplexObject]
impl PlacementResult {
    /// The decision as `flxp place --json` prints it.
    async fn document(&self) -> Result<Json<serde_json::Value>, ApiError> {
        document(&self.decision, "the placement decision")
    }
}

impl PlacementResult {
    /// From the core's decision.
    pub fn new(p: &Placement, explain: bool) -> Self {
        let mut shown = p.clone();
        if !(explain || p.node.is_none()) {
            shown.candidates.clear();
        }
        Self {
            shown,
            decision: p.clone(),
        }
    }
}

/// A registered rebalancing method: a value `rebalancePlan` and `rebalance` take as `method`.
#[derive(SimpleObject, Debug, Clone, PartialEq, Eq)]
#[graphql(name = "BalanceMethod")]
pub struct BalanceMethodInfo {
    /// The name to pass as `method` (`flxp`, `pve-topsis`).
    pub name: String,
    /// What it does, in one line.
    pub description: String,
}

impl BalanceMethodInfo {
    /// Every method of a registry, in its order.
    pub fn all(registry: &Registry) -> Vec<Self> {
        registry
            .iter()
            .map(|m| Self {
                name: m.as_str().to_owned(),
                description: m.description().to_owned(),
            })
            .collect()
    }
}

/// A rebalancing or evacuation plan: the plan `flxp balance --json` prints, field for field, and
/// what the service knows beyond it.
#[derive(SimpleObject, Debug, Clone)]
#[graphql(complex)]
pub struct PlanResult {
    /// The core's plan; its fields are this object's.
    #[graphql(flatten)]
    pub plan: Plan,
    /// For an evacuation plan (`evacuationPlan`, a dry run): the running guests it would leave
    /// on the node, each with why; empty otherwise (a run's result says what stayed).
    pub left_running: Vec<LeftRunning>,
    /// A digest of the goal and of the cluster the plan was made on: `rebalance` and `evacuate`
    /// given it carry the plan out only while the cluster is still the same (else `STALE_PLAN`).
    pub fingerprint: Option<String>,
}

#[ComplexObject]
impl PlanResult {
    /// The plan as `flxp balance --json` prints it.
    #[graphql(
        deprecation = "every field of the plan is a typed field of PlanResult now (nodesBefore, nodesAfter, skipped, bounds, plugin, ...); select those"
    )]
    async fn document(&self) -> Result<Json<serde_json::Value>, ApiError> {
        document(&self.plan, "the plan")
    }
}

impl From<Plan> for PlanResult {
    fn from(plan: Plan) -> Self {
        Self {
            plan,
            left_running: Vec::new(),
            fingerprint: None,
        }
    }
}

/// `value` as a JSON document; a value that does not serialise is an internal error naming
/// `what`, never an empty document.
pub fn document<T: serde::Serialize>(
    value: &T,
    what: &str,
) -> Result<Json<serde_json::Value>, ApiError> {
    serde_json::to_value(value)
        .map(Json)
        .map_err(|e| ApiError::internal(format!("cannot write {what} as JSON: {e}")))
}

/// What `rebalance` or `evacuate` did.
#[derive(SimpleObject, Debug, Clone)]
pub struct RunResult {
    /// The plan.
    pub plan: PlanResult,
    /// Whether it was carried out (false for a dry run).
    pub executed: bool,
    /// Migrations done.
    pub done: u32,
    /// Migrations that failed, with Proxmox's error.
    pub failed: Vec<String>,
    /// The execution report as JSON, when carried out.
    #[graphql(
        deprecation = "the report is typed now: select `execution` (done, failed, unknown, skipped, replans, unfinished, stopped, ...)"
    )]
    pub report: Option<Json<serde_json::Value>>,
    /// The execution report, when carried out: what `flxp balance --json` prints as
    /// `execution`, field for field.
    pub execution: Option<ExecutionReport>,
    /// For an evacuation: the running guests still on the node (read after the run; for a dry
    /// run, those the plan would leave), each with why; empty when it is safe to reboot.
    pub left_running: Vec<LeftRunning>,
    /// For an evacuation: the emptied node's state (read after the run; before it for a dry
    /// run); null for a rebalance, or when the zone could not be read again.
    pub node_state: Option<MaintenanceState>,
}

/// A network interface of a new VM.
#[derive(InputObject, Debug, Clone)]
pub struct InterfaceInput {
    /// A configured network's id (e.g. `"100"`).
    pub network: String,
}

/// What `createVM` builds.
#[derive(InputObject, Clone)]
#[graphql(name = "CreateVMOptions")]
pub struct CreateVmOptions {
    /// A configured image.
    pub image: String,
    /// A configured compute profile (cores, memory).
    pub compute_profile: String,
    /// A configured storage profile (storage, disk size).
    pub storage_profile: String,
    /// An OpenSSH public key for cloud-init.
    pub ssh_public_key: Option<String>,
    /// Network interfaces, `net0` first; none when absent or null.
    pub interfaces: Option<Vec<InterfaceInput>>,
    /// Cloud-init user.
    pub user: Option<String>,
    /// Cloud-init password (never logged).
    #[graphql(secret)]
    pub password: Option<String>,
    /// Whether backups include the VM's disks; true when absent or null.
    #[graphql(default_with = "Some(true)")]
    pub backup: Option<bool>,
    /// Tags for the VM, flxp constraint tags among them; none when absent or null.
    pub tags: Option<Vec<String>>,
    /// Placement policy; the configured default when absent.
    pub policy: Option<String>,
}

impl std::fmt::Debug for CreateVmOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CreateVmOptions")
            .field("image", &self.image)
            .field("compute_profile", &self.compute_profile)
            .field("storage_profile", &self.storage_profile)
            .field("interfaces", &self.interfaces)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "[redacted]"))
            .field("backup", &self.backup)
            .field("tags", &self.tags)
            .finish_non_exhaustive()
    }
}

/// One node's step in a rolling maintenance, as kept in Proxmox.
#[derive(SimpleObject, Debug, Clone)]
pub struct RollingNode {
    /// The node.
    pub node: String,
    /// `evacuating`, `hook`, `hooked`, `rebooting`, `waiting`, `returning` or `done`; `pending`
    /// in `rollingMaintenance`'s answer for a node the run has not reached yet.
    pub step: String,
    /// For `rebooting` and `waiting`: its boot time before the reboot (epoch seconds).
    pub boot: Option<i64>,
    /// Why the run stopped at this step; none while it goes on. Kept in Proxmox with the step.
    pub error: Option<String>,
}

impl From<&flxp_engine::rolling::NodeProgress> for RollingNode {
    fn from(p: &flxp_engine::rolling::NodeProgress) -> Self {
        use flxp_engine::rolling::Step;
        Self {
            node: p.node.clone(),
            step: p.step.as_str().to_owned(),
            boot: matches!(p.step, Step::Rebooting | Step::Waiting).then_some(p.boot),
            error: p.error.clone(),
        }
    }
}

impl From<&flxp_engine::rolling::Queued> for RollingNode {
    fn from(q: &flxp_engine::rolling::Queued) -> Self {
        match &q.progress {
            Some(p) => Self::from(p),
            None => Self {
                node: q.node.clone(),
                step: "pending".to_owned(),
                boot: None,
                error: None,
            },
        }
    }
}

/// The last rolling maintenance `rollingMaintenance` started in a zone since this flxp started:
/// while it runs, and how it ended.
#[derive(SimpleObject, Debug, Clone)]
pub struct RollingRun {
    /// Its nodes, in the order it takes them.
    pub nodes: Vec<String>,
    /// `running` (also while it waits for the zone), `done`, `stopped` (flxp stopping, or its
    /// lease lapsing), `unsafe` (a node could not go out safely) or `failed`.
    pub outcome: String,
    /// Migrations done so far.
    pub done: u32,
    /// Migrations failed so far.
    pub failed: u32,
    /// The exit code `flxp rolling` would have ended with; none while it runs.
    pub exit_code: Option<i32>,
    /// Why it did not finish.
    pub error: Option<String>,
}

impl From<&crate::serve::dashboard::live::RollingRecord> for RollingRun {
    fn from(r: &crate::serve::dashboard::live::RollingRecord) -> Self {
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        let (done, failed) = match &r.end {
            Some(e) => (e.done, e.failed),
            None => r.progress.counts(),
        };
        Self {
            nodes: r.nodes.clone(),
            outcome: r.end.as_ref().map_or("running", |e| e.outcome).to_owned(),
            done: count(done),
            failed: count(failed),
            exit_code: r.end.as_ref().map(|e| i32::from(e.exit_code)),
            error: r.end.as_ref().and_then(|e| e.error.clone()),
        }
    }
}

/// One node of a rolling maintenance's schedule.
#[derive(SimpleObject, Debug, Clone)]
pub struct RollingScheduleNode {
    /// The node.
    pub node: String,
    /// An earlier run took it through already: skipped.
    pub done_before: bool,
    /// The evacuation that empties it, on the cluster as it is now (none when skipped); its
    /// `bounds` are left unknown (they would cost more than the plan on a large cluster).
    pub plan: Option<PlanResult>,
    /// Bytes the evacuation copies.
    pub bytes: u64,
    /// Seconds the evacuation's copies take at the expected migration bandwidth.
    pub estimated_secs: i64,
    /// The steps after the evacuation, in words.
    pub steps: Vec<String>,
    /// The wave it goes out with (1 the first; 0 when skipped): a wave's nodes are out together.
    pub wave: usize,
    /// Why it does not go out with the wave before it, when that wave had room for it.
    pub held_back: Option<String>,
}

/// What a rolling maintenance would do, node after node (nothing is changed).
#[derive(SimpleObject, Debug, Clone)]
pub struct RollingSchedule {
    /// The nodes, in the order they go.
    pub nodes: Vec<RollingScheduleNode>,
    /// Migrations out, over every node (as many go back home).
    pub migrations: usize,
    /// Bytes to copy out, over every node.
    pub bytes: u64,
    /// Seconds the copies out take at the expected migration bandwidth.
    pub estimated_secs: i64,
    /// Some guest fits on no other node: the run would stop at its node.
    pub unmet: bool,
    /// The hook the server's config runs on each emptied node (`[rolling] hook`), if any.
    pub hook: Option<String>,
    /// Whether each node is rebooted.
    pub reboot: bool,
    /// Most nodes out at a time (`[rolling] parallel`).
    pub parallel: usize,
}

impl RollingSchedule {
    /// The schedule as GraphQL answers it, with the hook and reboot it was made for.
    pub fn new(
        s: &flxp_engine::rolling::Schedule,
        options: &flxp_engine::rolling::RollingOptions,
    ) -> Self {
        Self {
            nodes: s
                .nodes
                .iter()
                .map(|n| RollingScheduleNode {
                    node: n.node.clone(),
                    done_before: n.done_before,
                    plan: n.plan.clone().map(PlanResult::from),
                    bytes: n.plan.as_ref().map_or(0, |p| p.bytes),
                    estimated_secs: n.secs,
                    steps: n.steps.clone(),
                    wave: n.wave,
                    held_back: n.held_back.clone(),
                })
                .collect(),
            migrations: s.migrations,
            bytes: s.bytes,
            estimated_secs: s.secs,
            unmet: s.unmet,
            hook: options.hook.as_ref().map(|h| h.command.join(" ")),
            reboot: options.reboot,
            parallel: options.parallel,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::schema::Code;

    /// A value whose serialisation fails, as a map with a non-string key would.
    struct Unwritable;

    impl serde::Serialize for Unwritable {
        fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
            Err(serde::ser::Error::custom("a key is not a string"))
        }
    }

    #[test]
    fn a_document_that_cannot_be_written_is_an_internal_error_not_an_empty_one() {
        let e = document(&Unwritable, "the plan").unwrap_err();
        assert_eq!(e.code, Code::Internal);
        assert_eq!(
            e.message,
            "cannot write the plan as JSON: a key is not a string"
        );
        assert_eq!(
            document(&[1, 2], "two numbers").unwrap().0,
            serde_json::json!([1, 2])
        );
    }
}
