//! Queries: nothing here changes the cluster.

use std::sync::Arc;

use async_graphql::{Context, Object, Result};
use flxp_core::State;
use flxp_core::balance::{BalanceOptions, MethodName, Registry};
use flxp_core::placement::PlacementRequest;
use flxp_engine::ClusterModel;

use super::types::{
    BalanceMethodInfo, Guest, Node, PlacementInput, PlacementResult, PlanResult, RollingNode,
    RollingRun, RollingSchedule, ZoneInfo,
};
use super::{ApiError, Code};
use crate::serve::state::{AppState, blocking};

/// The query root.
#[derive(Debug, Default)]
pub struct Query;

pub(super) use super::ctx::state;

/// The balancing options with `method` (a registered name) in place of the configured one.
///
/// The method is a string checked against the registry rather than a GraphQL enum: an
/// async-graphql enum is fixed at compile time, while methods come from a registry, whose names
/// `balanceMethods` lists; an unknown name is a bad-input error listing the known ones.
pub(super) fn balance_options(
    s: &AppState,
    method: Option<&str>,
    registry: &Registry,
) -> Result<BalanceOptions, ApiError> {
    let mut options = s.config.balance.clone();
    if let Some(name) = method {
        options.method = method_name(name, registry)?;
    }
    Ok(options)
}

/// A `method` argument checked against the registry (the service's: built-in methods and balance
/// plugins); an unknown name is a bad-input error naming the argument, as the other argument
/// errors do (`policy: ...`, `request.memory: ...`), and listing the known methods.
pub(crate) fn method_name(name: &str, registry: &Registry) -> Result<MethodName, ApiError> {
    registry
        .parse(name)
        .map_err(|e| ApiError::bad_input(format!("method: {e}")))
}

/// Maps a core error: a refused request is bad input, anything else a bug.
pub(super) fn core_error(e: flxp_core::Error) -> ApiError {
    match e {
        flxp_core::Error::Request(m) => ApiError::bad_input(m),
        e @ flxp_core::Error::UnknownHost { .. } => ApiError::new(Code::UnknownNode, e.to_string()),
        flxp_core::Error::Option { name, message } => {
            ApiError::bad_input(format!("{name}: {message}"))
        }
        other => ApiError::internal(other),
    }
}

#[Object]
impl Query {
    /// The configured zones.
    async fn zones(&self, ctx: &Context<'_>) -> Result<Vec<ZoneInfo>> {
        let s = state(ctx)?;
        Ok(s.zones
            .values()
            .map(|z| ZoneInfo {
                name: z.name.clone(),
                reachable: z.answered_within(s.ready_window),
                simulated: s.simulated,
                power: s.config.consolidate.shutdown,
            })
            .collect())
    }

    /// The nodes of a zone with their usage (reservations of VMs being created included) and the
    /// hard rules broken on each.
    async fn nodes(&self, ctx: &Context<'_>, zone: String) -> Result<Vec<Node>> {
        let s = state(ctx)?;
        let (model, st) = s.zone_model(&zone).await?;
        blocking("judging the nodes", move || {
            let report = flxp_core::status::status(&model.cluster, &model.rules, &st);
            report
                .nodes
                .iter()
                .map(|n| Node::new(n, &report.violations, &model.cluster))
                .collect::<Vec<_>>()
        })
        .await
        .map_err(Into::into)
    }

    /// The guests of a zone.
    async fn guests(&self, ctx: &Context<'_>, zone: String) -> Result<Vec<Guest>> {
        let s = state(ctx)?;
        let (model, st) = s.zone_model(&zone).await?;
        Ok(Guest::all(&model.cluster, &st))
    }

    /// Where a new VM would go and why (nothing is created): every node's verdict with `explain`.
    async fn placement(
        &self,
        ctx: &Context<'_>,
        zone: String,
        request: PlacementInput,
        #[graphql(default = false)] explain: bool,
    ) -> Result<PlacementResult> {
        let s = state(ctx)?;
        let z = s.zone(&zone)?;
        let req = placement_request(s, request)?;
        let (model, st) = s.model(z).await?;
        let placer = s.scheduler.placer(Some(&zone));
        let decision = blocking("placing", move || {
            placer.place(&model.cluster, &model.rules, &st, &req)
        })
        .await?
        .map_err(|e| {
            s.metrics.decision(&zone, "placement", "error");
            core_error(e)
        })?;
        let outcome = if decision.node.is_some() {
            "placed"
        } else {
            "no_capacity"
        };
        s.metrics.decision(&zone, "placement", outcome);
        Ok(PlacementResult::new(&decision, explain))
    }

    /// The rebalancing methods `rebalancePlan` and `rebalance` take as `method`.
    async fn balance_methods(&self, ctx: &Context<'_>) -> Result<Vec<BalanceMethodInfo>> {
        Ok(BalanceMethodInfo::all(state(ctx)?.scheduler.methods()))
    }

    /// The rebalancing plan for a zone now (nothing is moved).
    async fn rebalance_plan(
        &self,
        ctx: &Context<'_>,
        zone: String,
        #[graphql(desc = "A name `balanceMethods` lists; the configured method if absent.")]
        method: Option<String>,
    ) -> Result<PlanResult> {
        let s = state(ctx)?;
        let options = balance_options(s, method.as_deref(), s.scheduler.methods())?;
        let (model, st) = s.zone_model(&zone).await?;
        let goal = balance_goal(&options);
        let fingerprint = super::safety::fingerprint(&goal, &model.cluster);
        let plan = rebalance(s, &zone, model, st, options).await?;
        let mut result = PlanResult::from(plan);
        result.fingerprint = Some(fingerprint);
        Ok(result)
    }

    /// The progress of a rolling maintenance in a zone: one entry per node it has reached
    /// (empty when none runs or the last one finished).
    async fn rolling_progress(&self, ctx: &Context<'_>, zone: String) -> Result<Vec<RollingNode>> {
        let s = state(ctx)?;
        let z = s.zone(&zone)?;
        let executor = flxp_engine::Executor::new(zone.as_str(), z.api.clone(), &s.scheduler)
            .with_overrides(z.overrides.clone());
        let progress = executor
            .rolling_progress()
            .await
            .map_err(|e| ApiError::new(Code::ProxmoxError, flxp_engine::error_chain(&e)))?;
        Ok(progress.values().map(RollingNode::from).collect())
    }

    /// The last rolling maintenance `rollingMaintenance` started in the zone since this flxp
    /// started: running, or how it ended (none if none was started). Each node's step is
    /// `rollingProgress`.
    async fn rolling_run(&self, ctx: &Context<'_>, zone: String) -> Result<Option<RollingRun>> {
        let s = state(ctx)?;
        s.zone(&zone)?;
        Ok(s.live.rolling_run(&zone).as_ref().map(RollingRun::from))
    }

    /// What `rollingMaintenance` with the same arguments would do, node after node: each
    /// evacuation's migrations, bytes and estimated time, guests that fit nowhere else, the
    /// steps after (nothing is changed).
    async fn rolling_schedule(
        &self,
        ctx: &Context<'_>,
        zone: String,
        #[graphql(default)] nodes: Vec<String>,
        #[graphql(default = true)] reboot: bool,
    ) -> Result<RollingSchedule> {
        let s = state(ctx)?;
        let z = s.zone(&zone)?;
        let options = super::run::rolling_options(s, reboot);
        let schedule = super::run::executor_for(s, &zone, z)
            .rolling_schedule(&nodes, &options, &|_| {})
            .await
            .map_err(|e| match e {
                flxp_engine::Error::UnknownNode { .. } => {
                    ApiError::new(Code::UnknownNode, e.to_string())
                }
                other => ApiError::new(Code::ProxmoxError, flxp_engine::error_chain(&other)),
            })?;
        Ok(RollingSchedule::new(&schedule, &options))
    }

    /// The plan to empty a node (nothing is moved).
    async fn evacuation_plan(
        &self,
        ctx: &Context<'_>,
        zone: String,
        node: String,
    ) -> Result<PlanResult> {
        let s = state(ctx)?;
        let (model, st) = s.zone_model(&zone).await?;
        let plan = evacuation(s, &zone, Arc::clone(&model), st, &node).await?;
        Ok(evacuation_result(&model, &node, &plan).0)
    }
}

/// What a rebalancing plan's fingerprint says it is for.
pub(super) fn balance_goal(options: &BalanceOptions) -> String {
    format!("balance {}", options.method)
}

/// What an evacuation plan's fingerprint says it is for.
pub(super) fn evacuation_goal(node: &str) -> String {
    format!("evacuate {node}")
}

/// An evacuation plan of `node` as GraphQL answers it, with the running guests it would leave
/// there, and the node's state now.
pub(super) fn evacuation_result(
    model: &flxp_core::Model,
    node: &str,
    plan: &flxp_core::balance::Plan,
) -> (
    PlanResult,
    Option<flxp_core::left_running::MaintenanceState>,
) {
    let mut result = PlanResult::from(plan.clone());
    let Some(idx) = model.cluster.node_idx_loose(node) else {
        return (result, None);
    };
    result.fingerprint = Some(super::safety::fingerprint(
        &evacuation_goal(&model.cluster.node(idx).name),
        &model.cluster,
    ));
    let left = flxp_core::left_running::left_running(&model.cluster, &[idx], plan, false);
    result.left_running = left;
    let now = flxp_core::left_running::maintenance_state(&model.cluster, &model.rules, idx);
    (result, Some(now))
}

/// The rebalancing plan on a model, computed off the async workers.
pub(super) async fn rebalance(
    s: &AppState,
    zone: &str,
    model: Arc<ClusterModel>,
    st: State,
    options: BalanceOptions,
) -> Result<flxp_core::balance::Plan, ApiError> {
    let placer = s.scheduler.placer(Some(zone));
    blocking("planning", move || {
        flxp_core::balance::plan(&model.cluster, &model.rules, &st, &placer, &options)
    })
    .await?
    .map_err(core_error)
}

/// The evacuation plan of a node named by the user, computed off the async workers.
pub(super) async fn evacuation(
    s: &AppState,
    zone: &str,
    model: Arc<ClusterModel>,
    st: State,
    node: &str,
) -> Result<flxp_core::balance::Plan, ApiError> {
    let idx = model.cluster.node_idx_loose(node).ok_or_else(|| {
        ApiError::new(
            Code::UnknownNode,
            format!(
                "node {node:?} is not in zone {zone}; nodes: {}",
                model
                    .cluster
                    .nodes()
                    .iter()
                    .map(|n| n.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    })?;
    let placer = s.scheduler.placer(Some(zone));
    let config = Arc::clone(&s.config);
    blocking("planning the evacuation", move || {
        flxp_core::evacuate::evacuate(
            &model.cluster,
            &model.rules,
            &st,
            &placer,
            &[idx],
            &config.evacuate,
        )
    })
    .await?
    .map_err(core_error)
}

/// A placement request from a profile or memory and cores.
fn placement_request(s: &AppState, r: PlacementInput) -> Result<PlacementRequest, ApiError> {
    let (memory, cores) = match (&r.compute_profile, &r.memory, r.cores) {
        (Some(id), None, None) => s.config.profile_size(id)?,
        (None, Some(m), Some(c)) => (
            crate::size::parse(m)
                .map_err(|e| ApiError::bad_input(format!("request.memory: {e}")))?,
            flxp_core::placement::check_cores(c)
                .map_err(|e| ApiError::bad_input(format!("request.cores: {e}")))?,
        ),
        _ => {
            return Err(ApiError::bad_input(
                "request: give either computeProfile, or memory and cores",
            ));
        }
    };
    Ok(PlacementRequest {
        memory,
        cores,
        tags: r.tags.unwrap_or_default(),
        host: r.host,
        policy: r.policy,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_method_is_bad_input_named_by_its_argument() {
        let e = method_name("fastest", Registry::builtin()).unwrap_err();
        assert_eq!(e.code, Code::BadInput);
        assert_eq!(
            e.message,
            r#"method: unknown balancing method "fastest" (known: flxp, pve-bruteforce, pve-topsis)"#
        );
    }
}
