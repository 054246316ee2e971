//! Mutations: `createVM`, `rebalance` and `evacuate`. Each runs as its own task, so a client that
//! hangs up does not abort a creation or a migration half-way; shutdown waits for them.

use std::fmt::Display;
use std::sync::Arc;

use async_graphql::{Context, ID, Object, Result};
use flxp_engine::{CreateError, Executor, Goal, VmRequest};
use flxp_pve::Secret;
use tokio::time::Instant;
use tracing::Instrument;

use super::query::{
    balance_goal, balance_options, core_error, evacuation, evacuation_goal, evacuation_result,
    rebalance, state,
};
use super::run::{executor_for, executor_with, live_progress, rolling_options};
use super::safety::{Claim, answer, fingerprint as fingerprint_of};
use super::types::{
    CreateVmOptions, Host, MaintenanceState, PlanResult, PowerAction, RollingNode, RunResult, Vm,
};
use super::{ApiError, Code};
use crate::config::catalog::VmParts;
use crate::serve::dashboard::live::RollingEnd;
use crate::serve::state::AppState;

/// The mutation root.
#[derive(Debug, Default)]
pub struct Mutation;

#[Object]
impl Mutation {
    /// Creates a VM: places it (or checks the named host), clones the image's template, sets the
    /// profiles, cloud-init, interfaces, tags and backup flag, and starts it.
    #[graphql(name = "createVM")]
    async fn create_vm(
        &self,
        ctx: &Context<'_>,
        zone: String,
        name: String,
        host: Option<String>,
        options: CreateVmOptions,
        #[graphql(
            desc = "Makes retries safe: a request with a key used before (within an hour) creates \
                    nothing and answers what the first one did, even while it still runs."
        )]
        idempotency_key: Option<String>,
    ) -> Result<Vm> {
        let s = state(ctx)?;
        super::views::require_operator(ctx, "createVM")?;
        let result = match idempotency_key {
            None => counted(s, zone, name, host, options).await,
            Some(key) => once(s, key, zone, name, host, options).await,
        };
        if let Ok(vm) = &result {
            super::audit::note_vm(ctx, vm);
        }
        Ok(result?)
    }

    /// Rebalances a zone now: plans, and carries the plan out unless `dryRun`.
    async fn rebalance(
        &self,
        ctx: &Context<'_>,
        zone: String,
        #[graphql(default = false)] dry_run: bool,
        #[graphql(desc = "A name `balanceMethods` lists; the configured method if absent.")]
        method: Option<String>,
        #[graphql(
            desc = "A plan's `fingerprint`: carry out only if the cluster is still the one \
                          that plan was made on (else `STALE_PLAN`)."
        )]
        fingerprint: Option<String>,
    ) -> Result<RunResult> {
        let s = state(ctx)?;
        let options = balance_options(s, method.as_deref(), s.scheduler.methods())?;
        let z = s.zone(&zone)?;
        let goal = balance_goal(&options);
        if dry_run {
            let (model, st) = s.model(z).await?;
            let now = fingerprint_of(&goal, &model.cluster);
            let plan = rebalance(s, &zone, model, st, options.clone()).await?;
            let mut result = dry(&plan);
            result.plan.fingerprint = Some(now);
            return Ok(result);
        }
        super::views::require_operator(ctx, "rebalance without dryRun")?;
        let expect = fingerprint.map(|f| (goal, f));
        let result = run(s, &zone, Goal::Balance(options), expect).await?;
        super::audit::note(ctx, &result);
        Ok(result)
    }

    /// Empties a node: plans its evacuation, and carries it out unless `dryRun`.
    async fn evacuate(
        &self,
        ctx: &Context<'_>,
        zone: String,
        node: String,
        #[graphql(default = false)] dry_run: bool,
        #[graphql(
            desc = "A plan's `fingerprint`: carry out only if the cluster is still the one \
                          that plan was made on (else `STALE_PLAN`)."
        )]
        fingerprint: Option<String>,
    ) -> Result<RunResult> {
        let s = state(ctx)?;
        let (model, st) = s.zone_model(&zone).await?;
        let plan = evacuation(s, &zone, Arc::clone(&model), st, &node).await?;
        if dry_run {
            let (plan_result, now) = evacuation_result(&model, &node, &plan);
            let mut result = dry(&plan);
            result.left_running = plan_result.left_running.clone();
            result.node_state = now.as_ref().map(MaintenanceState::from);
            result.plan = plan_result;
            return Ok(result);
        }
        super::views::require_operator(ctx, "evacuate without dryRun")?;
        let name = model
            .cluster
            .node_idx_loose(&node)
            .map(|i| model.cluster.node(i).name.clone())
            .unwrap_or(node);
        let expect = fingerprint.map(|f| (evacuation_goal(&name), f));
        let goal = Goal::Evacuate {
            nodes: vec![name],
            options: s.config.evacuate.clone(),
        };
        let result = run(s, &zone, goal, expect).await?;
        super::audit::note(ctx, &result);
        Ok(result)
    }

    /// Sets or clears the `flxp.maintenance` token in a node's notes (an evacuation sets it);
    /// true when the notes changed. Clearing removes exact `flxp.maintenance` tokens only.
    async fn maintenance(
        &self,
        ctx: &Context<'_>,
        zone: String,
        node: String,
        on: bool,
    ) -> Result<bool> {
        let s = state(ctx)?;
        super::views::require_operator(ctx, "maintenance")?;
        // A mark makes the acting flxp empty (or refill) the node: only the lease's holder writes it.
        let (z, name, _lease) = node_to_act_on(s, &zone, &node).await?;
        // Not beside a run of this flxp: an evacuation or a rolling maintenance planned before
        // the mark would go on sending guests to the node (its re-checks read node notes only
        // when something else changed). Waits for it to end, as a second run does.
        let _locks = zone_locks(s, &zone, z).await;
        if on {
            // Before the daemon reads the mark and empties the node: where its guests come from.
            let executor = executor_for(s, &zone, z);
            if let Err(e) = executor.record_homes(&name).await {
                tracing::warn!(zone = %zone, node = %name, error = %flxp_engine::error_chain(&e), "where the guests come from is not recorded: they will not go back by themselves");
            }
        }
        let changed = flxp_engine::maintenance::set(&z.api, &name, on).await;
        // Written or not (a timeout may still have written it), the daemon reads it back.
        s.daemon.notes_written(&zone, &name);
        let changed =
            changed.map_err(|e| ApiError::new(Code::ProxmoxError, flxp_engine::error_chain(&e)))?;
        s.live.maintenance(&zone, &name, on, changed);
        if changed {
            s.notify
                .send(crate::notify::events::maintenance_step(&zone, &name, on));
        }
        super::audit::note_values(
            ctx,
            serde_json::Value::Null,
            serde_json::json!({ "node": name, "changed": changed }),
        );
        drop(_locks);
        if !on && s.config.evacuate.return_home {
            go_home(s, &zone, z, name);
        }
        Ok(changed)
    }

    /// Switches a node off or wakes it, where `[consolidate] shutdown = true` allows power
    /// changes: `SHUTDOWN` only an empty node in maintenance with more than half the nodes
    /// staying online (checked on a fresh read), `WAKE` sends Wake-on-LAN. What was done, in a
    /// sentence.
    async fn power(
        &self,
        ctx: &Context<'_>,
        zone: String,
        node: String,
        action: PowerAction,
    ) -> Result<String> {
        let s = state(ctx)?;
        super::views::require_operator(ctx, "power")?;
        if !s.config.consolidate.shutdown {
            return Err(ApiError::bad_input(
                "power changes are off in this flxp: set [consolidate] shutdown = true (and give \
                 the token Sys.PowerMgmt) to switch nodes off and wake them",
            )
            .into());
        }
        let (z, name, _lease) = node_to_act_on(s, &zone, &node).await?;
        // Not beside a run of this flxp (one may be sending guests to the node).
        let _locks = zone_locks(s, &zone, z).await;
        let executor =
            Executor::new(&zone, z.api.clone(), &s.scheduler).with_overrides(z.overrides.clone());
        let power_error = |e: flxp_engine::consolidate::PowerError| match e {
            flxp_engine::consolidate::PowerError::Refused { .. } => {
                ApiError::bad_input(e.to_string())
            }
            other => ApiError::new(Code::ProxmoxError, flxp_engine::error_chain(&other)),
        };
        let done = match action {
            PowerAction::Shutdown => {
                executor
                    .shut_down_if_empty(&name)
                    .await
                    .map_err(power_error)?;
                format!("{name} is shutting down")
            }
            PowerAction::Wake => {
                let mac = executor.wake(&name).await.map_err(power_error)?;
                format!("Wake-on-LAN sent to {name} ({mac})")
            }
        };
        s.live.power(&zone, &name, &done);
        Ok(done)
    }

    /// Starts a rolling maintenance of `nodes` (none: every node, by name) in the background, as
    /// `flxp rolling` runs it with the config's `[rolling]` hook and boot timeout (a caller
    /// cannot name a command): each node emptied, the hook, rebooted (unless `reboot` is
    /// false), back online and quorate, its guests back home, one at a time. Answers the run's
    /// nodes in the order it takes them, each as it starts (`pending` until the run reaches it;
    /// a node an earlier run left out comes first, at its step); `rollingProgress` follows it
    /// (kept in Proxmox: a restarted flxp, or the CLI, continues it).
    async fn rolling_maintenance(
        &self,
        ctx: &Context<'_>,
        zone: String,
        #[graphql(default)] nodes: Vec<String>,
        #[graphql(default = true)] reboot: bool,
    ) -> Result<Vec<RollingNode>> {
        let s = state(ctx)?;
        super::views::require_operator(ctx, "rollingMaintenance")?;
        let z = s.zone(&zone)?;
        let lease = act_lease(s, &zone).await?;
        let progress = live_progress(s);
        let executor = executor_with(s, &zone, z, Arc::clone(&progress));
        let options = rolling_options(s, reboot);
        // What would stop the run at once (an unknown node, a first node that may not go) is
        // the caller's answer, not only a line in the log.
        let order = executor
            .rolling_check(&nodes, &options)
            .await
            .map_err(|e| match e {
                flxp_engine::rolling::RollingError::UnknownNode { .. } => {
                    ApiError::new(Code::UnknownNode, e.to_string())
                }
                flxp_engine::rolling::RollingError::Unsafe { .. } => {
                    ApiError::new(Code::NoCapacity, e.to_string())
                }
                other => ApiError::new(Code::Unavailable, other.to_string()),
            })?;
        let (runs, daemon, name) = (Arc::clone(&z.runs), s.daemon.clone(), zone.clone());
        let (metrics, live, stop) = (Arc::clone(&s.metrics), Arc::clone(&s.live), s.stop.clone());
        let queued: Vec<String> = order.iter().map(|q| q.node.clone()).collect();
        s.live.rolling_asked(&zone, &queued, Arc::clone(&progress));
        s.work.spawn(async move {
            // Like every run: none beside it in the zone, and no daemon round meanwhile.
            let _run = runs.lock_owned().await;
            let _round = daemon.lock_zone(&name).await.ok();
            // Held while the maintenance runs, released at its end.
            let _lease = lease;
            live.rolling_started(&name, &queued);
            let tell = |n: flxp_engine::rolling::News| {
                metrics.rolling_step(&name, &n.node, n.step);
                live.rolling_step(&name, &n);
                tracing::info!(zone = %name, "rolling maintenance: {}", n.line);
            };
            let result = executor.rolling(&nodes, &options, &tell).await;
            match &result {
                Ok(r) => tracing::info!(zone = %name, done = r.done.len(), migrations = r.migrations, "rolling maintenance done"),
                Err(e) => tracing::error!(zone = %name, error = %e, "rolling maintenance stopped"),
            }
            let end = RollingEnd::new(&result, progress.counts(), stop.is_stopped());
            live.rolling_ended(&name, &end);
        });
        Ok(order.iter().map(RollingNode::from).collect())
    }
}

/// The zone's run and round locks of this flxp: no run of its own (mutation, rolling
/// maintenance, guests going home) and no daemon round beside the holder. Waits for them.
async fn zone_locks(
    s: &AppState,
    zone: &str,
    z: &crate::serve::zone::Zone,
) -> (
    tokio::sync::OwnedMutexGuard<()>,
    Option<tokio::sync::OwnedMutexGuard<()>>,
) {
    let run = match Arc::clone(&z.runs).try_lock_owned() {
        Ok(g) => g,
        Err(_) => {
            tracing::info!(
                zone,
                "waiting for the zone's running rebalance, evacuation or rolling maintenance"
            );
            Arc::clone(&z.runs).lock_owned().await
        }
    };
    (run, s.daemon.lock_zone(zone).await.ok())
}

/// A node of a zone by a name the user typed (any case), or `UNKNOWN_NODE` listing the nodes.
fn node_name(
    model: &flxp_engine::ClusterModel,
    zone: &str,
    node: &str,
) -> Result<String, ApiError> {
    match model.cluster.node_idx_loose(node) {
        Some(i) => Ok(model.cluster.node(i).name.clone()),
        None => {
            let known: Vec<&str> = model
                .cluster
                .nodes()
                .iter()
                .map(|n| n.name.as_str())
                .collect();
            Err(ApiError::new(
                Code::UnknownNode,
                format!(
                    "node {node:?} is not in zone {zone}; nodes: {}",
                    known.join(", ")
                ),
            ))
        }
    }
}

/// Takes the guests recorded on `node` back home in the background, as a run (the zone's run and
/// round locks held); what went wrong is logged.
fn go_home(s: &AppState, zone: &str, z: &crate::serve::zone::Zone, node: String) {
    let executor = executor_for(s, zone, z);
    let (runs, daemon, name) = (Arc::clone(&z.runs), s.daemon.clone(), zone.to_owned());
    let options = s.config.evacuate.clone();
    let live = Arc::clone(&s.live);
    s.work.spawn(async move {
        let _run = runs.lock_owned().await;
        let _round = daemon.lock_zone(&name).await.ok();
        match executor.plan_return(&node, &options).await {
            Ok((goal, plan)) => {
                // A run like the others on the event stream, even with nothing to take back.
                live.run_started(&name, goal.as_str(), plan.migrations.len());
                let (mut done, mut failed) = (0, 0);
                if !plan.migrations.is_empty() {
                    let report = executor.execute(plan, &goal).await;
                    tracing::info!(zone = %name, node, summary = %report.summary(), "guests back home");
                    (done, failed) = (report.done.len(), report.failed.len());
                }
                live.run_ended(&name, goal.as_str(), done, failed);
                if let Err(e) = executor.settle_homes(&node).await {
                    tracing::warn!(zone = %name, node, error = %flxp_engine::error_chain(&e), "cannot update where the guests come from");
                }
            }
            Err(e) => tracing::error!(zone = %name, node, error = %flxp_engine::error_chain(&e), "cannot plan the guests back home"),
        }
    });
}

/// The zone, the node's name as Proxmox spells it and the zone's lease to hold while acting,
/// for an action on the node; refused unless this flxp may act in the zone (with `[lease]`,
/// only the lease's holder).
async fn node_to_act_on<'a>(
    s: &'a AppState,
    zone: &str,
    node: &str,
) -> Result<
    (
        &'a Arc<crate::serve::zone::Zone>,
        String,
        Option<flxp_engine::LeaseGuard>,
    ),
    ApiError,
> {
    let z = s.zone(zone)?;
    let (model, _) = s.model(z).await?;
    let name = node_name(&model, zone, node)?;
    let lease = act_lease(s, zone).await?;
    Ok((z, name, lease))
}

/// The zone's lease for the time this action acts (taken now with `[lease] hold = acting`), or
/// the refusal naming its holder.
async fn act_lease(s: &AppState, zone: &str) -> Result<Option<flxp_engine::LeaseGuard>, ApiError> {
    s.daemon
        .may_act(zone)
        .await
        .map_err(|why| ApiError::new(Code::Unavailable, why.to_string()))
}

/// Writes the maintenance mark before an evacuation; a node whose notes cannot be written (the
/// token lacks `Sys.Modify` on `/nodes`) is still emptied, with a warning.
async fn mark(z: &crate::serve::zone::Zone, node: &str, on: bool) {
    if let Err(e) = flxp_engine::maintenance::set(&z.api, node, on).await {
        tracing::warn!(zone = %z.name, node, error = %flxp_engine::error_chain(&e), "the evacuated node is not marked in its notes: a later round may fill it again");
    }
}

fn dry(plan: &flxp_core::balance::Plan) -> RunResult {
    RunResult {
        plan: PlanResult::from(plan.clone()),
        executed: false,
        done: 0,
        failed: Vec::new(),
        report: None,
        execution: None,
        left_running: Vec::new(),
        node_state: None,
    }
}

/// Plans and carries out a goal in its own task; with `expect` (a goal's name and a plan's
/// fingerprint), only if the cluster is still the one that plan was made on.
async fn run(
    s: &AppState,
    zone: &str,
    goal: Goal,
    expect: Option<(String, String)>,
) -> Result<RunResult, ApiError> {
    let z = s.zone(zone)?;
    let executor = executor_for(s, zone, z);
    let live = Arc::clone(&s.live);
    let live_zone = zone.to_owned();
    let notify = s.notify.clone();
    let span = tracing::info_span!("run", zone = %zone, goal = goal.as_str());
    // One run at a time in a zone, and none during a daemon round, so two executors never book
    // the same room. Waiting happens here, in the request: a client that gives up while another
    // run goes on leaves nothing queued to start behind its back.
    let (run_lock, round) = zone_locks(s, zone, z).instrument(span.clone()).await;
    // With `[lease] enabled`, only the replica holding the zone's lease moves guests there; it
    // is held until the run ends.
    let lease = act_lease(s, zone).await?;
    // Checked with the zone's locks held: of two requests carrying out one plan (a double
    // click), the second finds the cluster the first changed.
    if let Some((goal_name, want)) = expect {
        let model = z
            .model()
            .await
            .map_err(|e| ApiError::new(Code::Unavailable, e.0))?;
        if fingerprint_of(&goal_name, &model.cluster) != want {
            return Err(ApiError::new(
                Code::StalePlan,
                "the cluster changed since this plan was made (it was carried out already, or \
                 guests or nodes changed): plan again and check the new plan",
            ));
        }
    }
    // New VMs keep off the nodes being emptied until the run ends.
    let evacuating = match &goal {
        Goal::Evacuate { nodes, .. } => Some(z.evacuating(nodes)),
        _ => None,
    };
    // The node stays in maintenance after the run, so no later round fills it again; the
    // in-memory mark above covers the time before the notes write is read back. It is written
    // only now, with the zone's locks held: written earlier, a daemon round starting in between
    // would read it and empty the node itself, beside this run.
    if let Goal::Evacuate { nodes, .. } = &goal {
        for node in nodes {
            // Where its guests come from, before the first moves: they go back when the
            // maintenance ends.
            if let Err(e) = executor.record_homes(node).await {
                tracing::warn!(zone = %z.name, node, error = %flxp_engine::error_chain(&e), "where the guests come from is not recorded: they will not go back by themselves");
            }
            mark(z, node, true).await;
            s.daemon.notes_written(zone, node);
        }
    }
    let task = s.work.spawn(
        async move {
            // Once started, a run goes on to its end even if its client hangs up: migrations
            // are not left half-followed.
            let _held = (run_lock, round, evacuating, lease);
            let plan = executor.plan(&goal).await?;
            live.run_started(&live_zone, goal.as_str(), plan.migrations.len());
            let report = if plan.is_empty() {
                None
            } else {
                Some(executor.execute(plan.clone(), &goal).await)
            };
            let (done, failed) = report
                .as_ref()
                .map_or((0, 0), |r| (r.done.len(), r.failed.len()));
            live.run_ended(&live_zone, goal.as_str(), done, failed);
            let after = left_after(&executor, &goal, &plan, report.as_ref()).await;
            notify.send_all(crate::notify::events::from_run(
                &live_zone,
                &goal,
                &plan,
                report.as_ref(),
                &after.0,
            ));
            Ok::<_, flxp_engine::Error>((plan, report, after))
        }
        .instrument(span),
    );
    let (plan, report, (left, node_state)) =
        task.await
            .map_err(ApiError::internal)?
            .map_err(|e| match e {
                flxp_engine::Error::Plan { source } => core_error(source),
                flxp_engine::Error::UnknownNode { .. } => {
                    ApiError::new(Code::UnknownNode, e.to_string())
                }
                other => ApiError::new(Code::Unavailable, flxp_engine::error_chain(&other)),
            })?;
    Ok(RunResult {
        left_running: left,
        node_state: node_state.as_ref().map(MaintenanceState::from),
        executed: true,
        done: report
            .as_ref()
            .map_or(0, |r| u32::try_from(r.done.len()).unwrap_or(u32::MAX)),
        failed: report
            .as_ref()
            .map(|r| {
                let unknown = r.unknown.iter().map(|f| (f, "outcome unknown: "));
                r.failed
                    .iter()
                    .map(|f| (f, ""))
                    .chain(unknown)
                    .map(|(f, kind)| {
                        format!(
                            "{} ({}) {} → {}: {kind}{}",
                            f.vmid, f.name, f.from, f.to, f.error
                        )
                    })
                    .collect()
            })
            .unwrap_or_default(),
        report: report
            .as_ref()
            .map(|r| super::types::document(r, "the execution report"))
            .transpose()?,
        execution: report,
        plan: PlanResult::from(plan),
    })
}

/// After an evacuation, the running guests still on the emptied node and its state, read from
/// the zone again; nothing for other goals, or when the zone cannot be read (logged).
async fn left_after(
    executor: &Executor,
    goal: &Goal,
    plan: &flxp_core::balance::Plan,
    run: Option<&flxp_engine::ExecutionReport>,
) -> (
    Vec<flxp_core::left_running::LeftRunning>,
    Option<flxp_core::left_running::MaintenanceState>,
) {
    let Goal::Evacuate { nodes, .. } = goal else {
        return (Vec::new(), None);
    };
    let model = match executor.read().await {
        Ok(m) => m,
        Err(e) => {
            tracing::warn!(error = %flxp_engine::error_chain(&e), "cannot read the zone to tell what still runs on the emptied node");
            return (Vec::new(), None);
        }
    };
    // Read after the run (or after a plan that moved nothing): whatever is still there stayed.
    let nothing_run = flxp_engine::ExecutionReport::default();
    let left = crate::app::left::on_model(&model, goal, plan, Some(run.unwrap_or(&nothing_run)));
    let state = nodes
        .first()
        .and_then(|n| model.cluster.node_idx_loose(n))
        .map(|i| flxp_core::left_running::MaintenanceState::from_left(&model.cluster, i, &left));
    (left, state)
}

/// [`create`], counted in the metrics.
async fn counted(
    s: &AppState,
    zone: String,
    name: String,
    host: Option<String>,
    options: CreateVmOptions,
) -> Result<Vm, ApiError> {
    let started = Instant::now();
    let result = create(s, &zone, name, host, options).await;
    match &result {
        Ok(_) => {
            s.metrics.create_vm(&zone, "success");
            s.metrics
                .create_vm_seconds
                .get_or_create(&crate::serve::metrics::ZoneLabel { zone: zone.clone() })
                .observe(started.elapsed().as_secs_f64());
        }
        // A name no zone has is one label, whatever a client sends: series stay bounded.
        Err(e) if !s.zones.contains_key(&zone) => {
            s.metrics.create_vm("(unknown)", e.code.outcome());
        }
        Err(e) => s.metrics.create_vm(&zone, e.code.outcome()),
    }
    result
}

/// [`counted`] once per idempotency key: the first request with `key` creates, in its own task
/// (a client that hangs up does not lose the answer for its retry); every other one waits for
/// that answer and returns it. A VM created is the answer for an hour; an error only for the
/// requests that waited for it.
async fn once(
    s: &AppState,
    key: String,
    zone: String,
    name: String,
    host: Option<String>,
    options: CreateVmOptions,
) -> Result<Vm, ApiError> {
    let request = match &host {
        Some(h) => format!("zone {zone}, name {name}, host {h}"),
        None => format!("zone {zone}, name {name}"),
    };
    match s.idempotency.claim(&key, &request)? {
        Claim::First(tx) => {
            let state = s.clone();
            let task = s.work.spawn(async move {
                let result = counted(&state, zone, name, host, options).await;
                let _ = tx.send(Some(result.clone()));
                result
            });
            let result = task.await.unwrap_or_else(|e| Err(ApiError::internal(e)));
            // A failed creation leaves no VM (the steps after the clone remove it): the requests
            // that waited get its error, and a later retry with the key tries again.
            if result.is_err() {
                s.idempotency.forget(&key);
            }
            result
        }
        Claim::Wait(rx) => {
            tracing::info!(
                key,
                "createVM repeated with its idempotency key: answering the first"
            );
            answer(rx).await.unwrap_or_else(|| {
                s.idempotency.forget(&key);
                Err(ApiError::new(
                    Code::Unavailable,
                    "the first request with this idempotencyKey ended without an answer; retry",
                ))
            })
        }
    }
}

/// Resolves names to a [`VmRequest`] and creates the VM in its own task.
async fn create(
    s: &AppState,
    zone: &str,
    name: String,
    host: Option<String>,
    o: CreateVmOptions,
) -> Result<Vm, ApiError> {
    let z = s.zone(zone)?;
    let networks: Vec<String> = o
        .interfaces
        .unwrap_or_default()
        .into_iter()
        .map(|i| i.network)
        .collect();
    let parts = VmParts {
        compute_profile: &o.compute_profile,
        storage_profile: &o.storage_profile,
        image: &o.image,
        networks: &networks,
    };
    let req = VmRequest {
        name,
        host,
        ssh_public_key: o.ssh_public_key,
        user: o.user,
        password: o.password.map(Secret::new),
        backup: o.backup.unwrap_or(true),
        tags: o.tags.unwrap_or_default(),
        policy: o.policy,
        ..s.config.vm_request(zone, &parts)?
    };
    // Refuse what needs no cluster before reading it.
    req.validate().map_err(|e| create_error(s, zone, e))?;
    let (model, _) = s.model(z).await?;
    let zone_arc = Arc::clone(z);
    let span = tracing::info_span!("create_vm", zone = %zone);
    let task = s
        .work
        .spawn(async move { zone_arc.creator.create(&model, &req).await }.instrument(span));
    let created = task
        .await
        .map_err(ApiError::internal)?
        .map_err(|e| create_error(s, zone, e))?;
    s.metrics.decision(zone, "create_vm", "placed");
    s.live.created(
        zone,
        crate::serve::dashboard::live::Created {
            vmid: created.vmid,
            name: created.name.clone(),
            node: created.node.clone(),
            clone_task: created.clone_task.clone(),
        },
    );
    let warnings: Vec<String> = created
        .placement
        .request_warnings()
        .iter()
        .map(ToString::to_string)
        .chain(created.warnings.iter().cloned())
        .collect();
    for w in &warnings {
        tracing::warn!(vmid = created.vmid, warning = %w, "createVM");
    }
    Ok(Vm {
        warnings,
        id: ID(created.vmid.to_string()),
        name: created.name,
        host: Host {
            id: ID(created.node.clone()),
            name: created.node,
        },
        zone: zone.to_owned(),
    })
}

fn create_error(s: &AppState, zone: &str, e: CreateError) -> ApiError {
    let text = |e: &dyn Display| e.to_string();
    match e {
        CreateError::Invalid { .. } => ApiError::bad_input(text(&e)),
        CreateError::UnknownImage { .. } => ApiError::new(Code::UnknownImage, text(&e)),
        CreateError::NoCapacity { .. } => {
            s.metrics.decision(zone, "create_vm", "no_capacity");
            // With power saving on, a daemon round wakes a node flxp switched off: run one now
            // rather than an interval later.
            s.daemon.want_room(zone);
            if s.daemon.options().power.is_some() {
                let (daemon, zone) = (s.daemon.clone(), zone.to_owned());
                tokio::spawn(async move {
                    if let Err(e) = daemon.run_round(&zone).await {
                        tracing::warn!(zone, error = %e, "round to wake a node could not run");
                    }
                });
            }
            ApiError::new(Code::NoCapacity, text(&e))
        }
        CreateError::Placement(c) => {
            s.metrics.decision(zone, "create_vm", "error");
            core_error(c)
        }
        CreateError::Step { .. } => ApiError::new(Code::ProxmoxError, text(&e)),
        // A fault of flxp, not of the request: never reported as bad input.
        e @ CreateError::Internal { .. } => ApiError::internal(text(&e)),
        other => ApiError::internal(text(&other)),
    }
}
