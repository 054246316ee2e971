//! Queries the dashboard reads besides the API's own: the caller's role, a zone's status in one
//! answer, the rules of each guest, the configured catalog and Proxmox's task history. Nothing
//! here changes the cluster.

use async_graphql::{Context, Object, Result, SimpleObject};

use super::ctx::state;
use super::types::Node;
use super::{ApiError, Code};
use crate::config::Role;
use crate::serve::state::blocking;
use flxp_core::constraints::Violation;

/// The dashboard's queries (merged into the query root).
#[derive(Debug, Default)]
pub struct ViewQuery;

/// A node's HA state as Proxmox's HA manager reports it.
#[derive(SimpleObject, Debug, Clone)]
pub struct NodeHa {
    /// The node.
    pub node: String,
    /// `online`, `maintenance`, `fence`, ...; null when HA has no word on it.
    pub state: Option<String>,
    /// Guests on it that HA manages.
    pub managed: u32,
}

/// A zone at a glance: what `flxp status` prints, with the imbalance against its threshold.
#[derive(SimpleObject, Debug, Clone)]
pub struct ZoneStatus {
    /// The zone.
    pub zone: String,
    /// The nodes, in name order.
    pub nodes: Vec<Node>,
    /// HA state per node, in the same order.
    pub ha: Vec<NodeHa>,
    /// Imbalance now, by the configured measure and metric.
    pub imbalance: f64,
    /// Balancing starts above this.
    pub threshold: f64,
    /// What the loads are of (`memory`, `cpu`, ...).
    pub metric: String,
    /// How imbalance is measured.
    pub measure: String,
    /// Max − min used memory percent over online nodes outside maintenance.
    pub memory_spread: f64,
    /// The same for CPU.
    pub cpu_spread: f64,
    /// Running guests.
    pub running: u32,
    /// All guests.
    pub guests: u32,
    /// Broken hard rules.
    pub violations: Vec<Violation>,
    /// Rules that cannot all hold.
    pub conflicts: Vec<String>,
    /// Problems in the input (unknown tags, guests left with `flxp.creating`, ...).
    pub warnings: Vec<String>,
}

/// The rules that apply to one guest.
#[derive(SimpleObject, Debug, Clone)]
pub struct GuestRules {
    /// The VMID.
    pub vmid: u32,
    /// Rule names: groups (`flxp.anti-affinity.web`, `ha:<id>`), node rules, preferences.
    pub rules: Vec<String>,
    /// Never moved by the rebalancer (`flxp.ignore`).
    pub ignored: bool,
}

/// A compute profile.
#[derive(SimpleObject, Debug, Clone)]
pub struct ComputeProfileInfo {
    /// Its id.
    pub id: String,
    /// vCPUs per socket.
    pub cores: u32,
    /// Sockets.
    pub sockets: u32,
    /// Memory, bytes.
    pub memory: u64,
}

/// A storage profile.
#[derive(SimpleObject, Debug, Clone)]
pub struct StorageProfileInfo {
    /// Its id.
    pub id: String,
    /// The Proxmox storage.
    pub storage: String,
    /// Boot disk size, bytes.
    pub disk: u64,
}

/// What `createVM` can be given by name.
#[derive(SimpleObject, Debug, Clone)]
pub struct Catalog {
    /// Compute profiles.
    pub compute_profiles: Vec<ComputeProfileInfo>,
    /// Storage profiles.
    pub storage_profiles: Vec<StorageProfileInfo>,
    /// Image ids.
    pub images: Vec<String>,
    /// Network ids.
    pub networks: Vec<String>,
    /// Placement policies.
    pub policies: Vec<String>,
    /// The default policy.
    pub default_policy: String,
}

/// One task of Proxmox's cluster task history.
#[derive(SimpleObject, Debug, Clone)]
pub struct TaskEntry {
    /// The UPID.
    pub upid: String,
    /// The node it ran on.
    pub node: String,
    /// Task type (`qmigrate`, `qmclone`, `qmstart`, ...).
    #[graphql(name = "type")]
    pub kind: String,
    /// The object (a VMID for guest tasks).
    pub id: String,
    /// Who started it (`root@pam!flxp`).
    pub user: String,
    /// Start, Unix seconds.
    pub starttime: Option<i64>,
    /// End, Unix seconds; null while it runs.
    pub endtime: Option<i64>,
    /// `OK` or the error; null while it runs.
    pub status: Option<String>,
    /// For a migration: the node it goes to, from its log; null when unknown.
    pub target: Option<String>,
    /// For a clone: the new VM's id, when this flxp created it (the task names the template).
    pub new_vmid: Option<u32>,
    /// For a clone: the new VM's name, when this flxp created it.
    pub new_name: Option<String>,
}

/// Task types that move or create guests: what the history shows unless asked for all.
const MOVES_AND_CREATIONS: &[&str] = &[
    "qmigrate",
    "vzmigrate",
    "hamigrate",
    "qmclone",
    "qmcreate",
    "vzcreate",
    "qmdestroy",
    "vzdestroy",
];

/// The caller's role, as the HTTP layer found it; none means the schema runs without it (only
/// possible in-process), which is treated as the lesser role.
pub(super) fn role(ctx: &Context<'_>) -> Role {
    ctx.data_opt::<Role>().copied().unwrap_or(Role::Viewer)
}

/// `FORBIDDEN` unless the caller is an operator.
pub(super) fn require_operator(ctx: &Context<'_>, what: &str) -> Result<(), ApiError> {
    match role(ctx) {
        Role::Operator => Ok(()),
        Role::Viewer => Err(ApiError::new(
            Code::Forbidden,
            format!(
                "{what} needs a token with role operator; this token's role is viewer (read and plan only)"
            ),
        )),
    }
}

#[Object]
impl ViewQuery {
    /// The role of the token this request carries: `viewer` or `operator`.
    async fn role(&self, ctx: &Context<'_>) -> String {
        role(ctx).as_str().to_owned()
    }

    /// A zone at a glance: nodes, imbalance against the threshold, broken rules, conflicts,
    /// warnings.
    async fn status(&self, ctx: &Context<'_>, zone: String) -> Result<ZoneStatus> {
        let s = state(ctx)?;
        let (model, st) = s.zone_model(&zone).await?;
        let o = &s.config.balance;
        let (measure, metric) = (o.measure, o.metric);
        // Judging every node and guest is CPU work: off the async workers, as `Query::nodes` does.
        let (report, imbalance, ha, nodes) = blocking("judging the zone", move || {
            let report = flxp_core::status::status(&model.cluster, &model.rules, &st);
            let nodes: Vec<Node> = report
                .nodes
                .iter()
                .map(|n| Node::new(n, &report.violations, &model.cluster))
                .collect();
            let imbalance = flxp_core::balance::imbalance(&model.cluster, &st, measure, metric);
            let ha: Vec<NodeHa> = model
                .cluster
                .node_indexes()
                .map(|i| {
                    let n = model.cluster.node(i);
                    let managed = model
                        .cluster
                        .guest_indexes()
                        .filter(|g| st.location(*g) == i && model.cluster.guest(*g).ha_managed)
                        .count();
                    NodeHa {
                        node: n.name.clone(),
                        state: n.ha_state.clone(),
                        managed: u32::try_from(managed).unwrap_or(u32::MAX),
                    }
                })
                .collect();
            (report, imbalance, ha, nodes)
        })
        .await?;
        Ok(ZoneStatus {
            zone: zone.clone(),
            nodes,
            ha,
            imbalance,
            threshold: o.trigger.threshold_for(o.measure),
            metric: o.metric.as_str().to_owned(),
            measure: o.measure.as_str().to_owned(),
            memory_spread: report.memory_spread,
            cpu_spread: report.cpu_spread,
            running: u32::try_from(report.running).unwrap_or(u32::MAX),
            guests: u32::try_from(report.guests).unwrap_or(u32::MAX),
            violations: report.violations.clone(),
            conflicts: report.conflicts.iter().map(ToString::to_string).collect(),
            warnings: report.warnings.iter().map(ToString::to_string).collect(),
        })
    }

    /// The rules that apply to each guest of a zone.
    async fn guest_rules(&self, ctx: &Context<'_>, zone: String) -> Result<Vec<GuestRules>> {
        let s = state(ctx)?;
        let (model, _) = s.zone_model(&zone).await?;
        Ok(model
            .cluster
            .guest_indexes()
            .map(|i| {
                let r = &model.rules.guests[i.get()];
                let mut rules: Vec<String> = r
                    .groups
                    .iter()
                    .map(|g| model.rules.group(*g).name.clone())
                    .chain(r.node_rules.iter().map(|n| n.rule.clone()))
                    .chain(r.preferences.iter().map(|p| p.rule.clone()))
                    .chain(r.selectors.iter().map(|l| format!("needs label {l}")))
                    .chain(r.tolerations.iter().map(|t| format!("tolerates {t}")))
                    .collect();
                rules.dedup();
                GuestRules {
                    vmid: model.cluster.guest(i).vmid,
                    rules,
                    ignored: r.ignore,
                }
            })
            .collect())
    }

    /// The configured profiles, images, networks and policies (what `createVM` takes).
    async fn catalog(&self, ctx: &Context<'_>) -> Result<Catalog> {
        let s = state(ctx)?;
        let c = &s.config;
        Ok(Catalog {
            compute_profiles: c
                .compute_profiles
                .iter()
                .map(|(id, p)| ComputeProfileInfo {
                    id: id.clone(),
                    cores: p.cores,
                    sockets: p.sockets.unwrap_or(1),
                    memory: p.memory.0,
                })
                .collect(),
            storage_profiles: c
                .storage_profiles
                .iter()
                .map(|(id, p)| StorageProfileInfo {
                    id: id.clone(),
                    storage: p.storage.clone(),
                    disk: p.disk.0,
                })
                .collect(),
            images: c.images.keys().cloned().collect(),
            networks: c.networks.keys().cloned().collect(),
            policies: s
                .scheduler
                .placer(None)
                .policy_names()
                .into_iter()
                .map(str::to_owned)
                .collect(),
            default_policy: s.scheduler.placer(None).options().policy.clone(),
        })
    }

    /// Recent tasks from Proxmox's cluster task history, newest first: migrations, clones,
    /// creations and removals unless `all`.
    async fn tasks(
        &self,
        ctx: &Context<'_>,
        zone: String,
        #[graphql(default = 50)] limit: i32,
        #[graphql(default = false)] all: bool,
    ) -> Result<Vec<TaskEntry>> {
        let s = state(ctx)?;
        let z = s.zone(&zone)?;
        let tasks = z
            .api
            .cluster_tasks()
            .await
            .map_err(|e| ApiError::new(Code::Unavailable, flxp_engine::error_chain(&e)))?;
        let mut out: Vec<TaskEntry> = tasks
            .into_iter()
            .filter(|t| all || MOVES_AND_CREATIONS.contains(&t.kind.as_deref().unwrap_or("")))
            .map(|t| TaskEntry {
                upid: t.upid.unwrap_or_default(),
                node: t.node.unwrap_or_default(),
                kind: t.kind.unwrap_or_default(),
                id: t.id.unwrap_or_default(),
                user: t.user.unwrap_or_default(),
                starttime: t.starttime,
                endtime: t.endtime,
                status: t.status,
                target: None,
                new_vmid: None,
                new_name: None,
            })
            .collect();
        out.sort_by_key(|t| std::cmp::Reverse(t.starttime));
        out.truncate(usize::try_from(limit.max(0)).unwrap_or(0));
        for t in &mut out {
            match t.kind.as_str() {
                "qmigrate" | "vzmigrate" => {
                    t.target = s.live.migration_target(&z.api, &t.upid).await;
                }
                "qmclone" => {
                    if let Some(made) = s.live.clone_made(&t.upid) {
                        t.new_vmid = Some(made.vmid);
                        t.new_name = Some(made.name);
                    }
                }
                _ => {}
            }
        }
        Ok(out)
    }
}
