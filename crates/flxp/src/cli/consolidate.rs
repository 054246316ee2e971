//! `flxp consolidate`: pack guests onto as few nodes as `[consolidate]`'s limits allow, mark the
//! emptied nodes in maintenance and, with `shutdown = true`, switch them off; `--dry-run` and
//! `--from-file` only plan. The plan names the nodes it frees and why each other node stays.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use anyhow::{Context, Result};
use flxp_core::consolidate::{Consolidation, Judged, consolidate};
use flxp_engine::consolidate::PowerError;
use flxp_engine::{ExecutionReport, Executor, LeaseKeeper};
use serde::Serialize;

use super::{RunArgs, UsageError, balance, load};
use crate::config::Config;
use crate::output;

/// Arguments of `flxp consolidate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub(crate) run: RunArgs,
    /// Instead: wake this node (Wake-on-LAN through the API), wait until it is online, clear its
    /// maintenance mark and rebalance onto it (`--zone` only).
    #[arg(long, value_name = "NODE")]
    wake: Option<String>,
    /// With `--wake`: the longest wait for the node to come online, seconds.
    #[arg(long, value_name = "S", default_value_t = 900, requires = "wake")]
    wake_timeout: u64,
    /// Seconds of planning work to allow on a large cluster before the nodes not tried yet stay
    /// (default from [consolidate] effort-secs, else the default budget of a few seconds).
    #[arg(long, value_name = "SECONDS", value_parser = balance::effort_parser)]
    effort: Option<f64>,
}

/// `flxp consolidate --wake NODE --json`.
#[derive(Debug, Serialize)]
struct WakeOutput<'a> {
    node: &'a str,
    /// The MAC address Proxmox built the packet from (empty when it was online already).
    mac: &'a str,
    /// It was online already: no packet was sent.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    already_online: bool,
    /// The rebalance onto it.
    plan: &'a flxp_core::balance::Plan,
    #[serde(skip_serializing_if = "Option::is_none")]
    execution: Option<&'a ExecutionReport>,
    /// Why the rebalance onto it stays unmet (exit code 3, as `flxp balance`); absent when met.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    unmet: Vec<String>,
}

/// What switching one emptied node off did.
#[derive(Debug, Serialize)]
struct PowerOutcome {
    node: String,
    /// Switched off.
    ok: bool,
    /// Why not, when not; when switched off, a guest that began migrating onto it meanwhile
    /// (Proxmox stopped that migration).
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// `flxp consolidate --json`.
#[derive(Debug, Serialize)]
struct Output<'a> {
    consolidation: &'a Consolidation,
    dry_run: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    execution: Option<&'a ExecutionReport>,
    /// Emptied nodes switched off (or why not); empty without `[consolidate] shutdown`.
    shutdown: &'a [PowerOutcome],
    /// Nodes an interrupted consolidation marked that this one cannot finish: given back to
    /// service (maintenance and power marks cleared); always present, as `shutdown` is.
    back: &'a [String],
}

/// Runs `flxp consolidate`: exit 1 when a migration failed, a node could not be switched off, or
/// one was switched off while a guest began migrating onto it.
pub fn run(args: Args) -> Result<ExitCode> {
    let config = load::config(&args.run.source)?;
    let scheduler = load::scheduler(&config)?;
    let placer = scheduler.placer(None);
    let mut options = config.consolidate.options();
    if let Some(secs) = args.effort {
        options.effort_secs = secs;
    }
    if args.wake.is_some() && args.wake_timeout == 0 {
        return Err(UsageError(
            "--wake-timeout must be at least 1 second: 0 would give up before the node boots"
                .into(),
        )
        .into());
    }
    if args.wake.is_some() && args.run.source.from_file.is_some() {
        return Err(UsageError(
            "--wake powers a node of a live zone on: use it with --zone Z, not --from-file".into(),
        )
        .into());
    }
    let (c, execution, shutdown, back) = match (&args.run.source.from_file, &args.run.source.zone) {
        (Some(path), _) => {
            let m = load::model_to_plan(path)?;
            let mut options = options.clone();
            if let Some(l) = config.lease_settings("consolidate") {
                // As in a zone: the lease's node (configured, else the first) stays in service.
                let zone = args.run.source.zone.as_deref();
                let configured = zone.and_then(|z| l.nodes.get(z).cloned());
                let first = m.cluster.nodes().iter().map(|n| n.name.clone()).min();
                if let Some(node) = configured.or(first) {
                    let why = flxp_engine::lease::kept_because(&node, zone.unwrap_or("(the file)"));
                    options.keep.insert(node, why);
                }
            }
            let c = consolidate(
                &m.cluster,
                &m.rules,
                &m.state,
                &placer,
                &options,
                &config.evacuate,
                &progress(),
            )?;
            (c, None, Vec::new(), Vec::new())
        }
        (None, Some(zone)) if args.wake.is_some() => {
            config.zone(zone).map_err(UsageError::from)?;
            return wake(&config, &args, zone, &scheduler);
        }
        (_, None) if args.wake.is_some() => {
            return Err(UsageError("--wake needs --zone Z".into()).into());
        }
        (None, Some(zone)) => {
            // Before anything is written: the marks of the nodes to free too.
            let work =
                async |executor: Executor,
                       held: Option<&super::lease::Held>,
                       keeper: Option<&LeaseKeeper>| {
                    let executor = executor.with_kept_nodes(super::lease::kept_nodes(keeper).await);
                    let out = in_zone(executor, &config, &options, &args, zone, held).await?;
                    let (_, execution, shutdown, _) = &out;
                    let mut events = execution
                        .as_ref()
                        .map(|r| crate::notify::events::failed(zone, r))
                        .unwrap_or_default();
                    events.extend(shutdown.iter().filter(|p| p.ok).map(|p| {
                        crate::notify::events::shut_down(zone, &p.node, "flxp consolidate")
                    }));
                    crate::notify::send_once(&config, "consolidate", events).await;
                    Ok(out)
                };
            let acting = args.run.acting("consolidate");
            super::lease::run_in_zone(&config, zone, &scheduler, acting, work)?
        }
        (None, None) => return Err(load::no_cluster()),
    };
    if args.run.json {
        output::print_json(&Output {
            consolidation: &c,
            dry_run: execution.is_none(),
            execution: execution.as_ref(),
            shutdown: &shutdown,
            back: &back,
        })?;
    } else {
        if args.run.source.from_file.is_some() {
            print(&c);
        }
        if let Some(report) = &execution {
            output::print_execution(report);
        }
        for node in &back {
            output::say(if execution.is_none() && args.run.dry_run {
                format!("{node}: would go back in service (its consolidation cannot be finished)")
            } else {
                format!("{node}: back in service (its consolidation cannot be finished)")
            });
        }
        for s in &shutdown {
            output::say(match &s.error {
                None => format!("{}: switched off", s.node),
                // It names the node and the guest that was landing.
                Some(e) if s.ok => e.clone(),
                Some(e) => {
                    // The refusal names the node and says so itself: said once.
                    let own = format!("node {} is not switched off: ", s.node);
                    format!(
                        "{}: not switched off: {}",
                        s.node,
                        e.strip_prefix(&own).unwrap_or(e)
                    )
                }
            });
        }
    }
    let failed = execution.as_ref().is_some_and(|r| !r.is_clean())
        || shutdown.iter().any(|s| s.error.is_some());
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Plans on the zone, prints it, and unless dry: marks and empties the freed nodes, then switches
/// them off when configured and every migration went well.
async fn in_zone(
    executor: Executor,
    config: &Config,
    options: &flxp_core::consolidate::ConsolidateOptions,
    args: &Args,
    zone: &str,
    lease: Option<&super::lease::Held>,
) -> Result<(
    Consolidation,
    Option<ExecutionReport>,
    Vec<PowerOutcome>,
    Vec<String>,
)> {
    let c = executor
        .plan_consolidation_telling(options, &config.evacuate, Some(Arc::new(progress())))
        .await
        .with_context(|| format!("cannot plan a consolidation in zone {zone}"))?;
    if !args.run.json {
        print(&c);
    }
    if args.run.dry_run {
        // What a real run would give back, as it would.
        let back = c
            .kept
            .iter()
            .filter(|k| k.resumed)
            .map(|k| k.node.clone())
            .collect();
        return Ok((c, None, Vec::new(), back));
    }
    // A marked node this run cannot finish goes back to service, not left in maintenance.
    let mut back = Vec::new();
    for k in c.kept.iter().filter(|k| k.resumed) {
        flxp_engine::maintenance::set(executor.api(), &k.node, false)
            .await
            .with_context(|| format!("cannot give {} back to service", k.node))?;
        executor
            .clear_power_mark(&k.node)
            .await
            .with_context(|| format!("cannot clear the power mark of {}", k.node))?;
        back.push(k.node.clone());
    }
    if c.freed.is_empty() {
        return Ok((c, None, Vec::new(), back));
    }
    // The power marks first (in the notes of a node that stays), so that a rerun after an
    // interruption finishes this consolidation and the daemon knows which nodes it may wake.
    let now = executor.now();
    executor
        .mark_freed(&c, now)
        .await
        .with_context(|| format!("cannot mark the nodes to free in zone {zone}"))?;
    let goal = flxp_engine::consolidate::goal(&c, &config.evacuate);
    // The plan was printed above: only carry it out (marking the nodes first, as evacuate does).
    let (_, report) = balance::plan_and_run(
        executor.clone(),
        &goal,
        Some(c.plan.clone()),
        false,
        true,
        zone,
        lease,
    )
    .await?;
    let mut shutdown = Vec::new();
    if config.consolidate.shutdown {
        for node in c.freed_names() {
            // A node a guest did not move off stays on, in maintenance and marked off, until a
            // rerun finishes it or gives it back; each other freed node goes off once a fresh
            // read shows it empty, even when another node's migration failed.
            let stuck = stuck_on(&node, report.as_ref());
            if !stuck.is_empty() {
                shutdown.push(PowerOutcome {
                    error: Some(kept_on(&node, &stuck)),
                    node,
                    ok: false,
                });
                continue;
            }
            let r = executor.shut_down_if_empty(&node).await;
            // Off either way when a migration raced it (the report names the guest).
            let off = matches!(r, Ok(()) | Err(PowerError::Raced { .. }));
            if off {
                // The interval before a wake runs from the shutdown (not from the start of the
                // run, before the migrations), a resumed one too.
                if let Err(e) = executor.stamp_power_mark(&node, executor.now()).await {
                    tracing::warn!(node, error = %flxp_engine::error_chain(&e), "power mark not re-dated");
                }
            }
            shutdown.push(PowerOutcome {
                node,
                ok: off,
                error: r.err().map(|e| flxp_engine::error_chain(&e)),
            });
        }
    }
    Ok((c, report, shutdown, back))
}

/// The guests of a freed node that a run's migrations did not move off it (failed, unknown,
/// skipped or unfinished).
fn stuck_on(node: &str, report: Option<&ExecutionReport>) -> Vec<u32> {
    let mut stuck: Vec<u32> = report
        .map(|r| {
            let failed = r.failed.iter().chain(&r.unknown).map(|f| (f.vmid, &f.from));
            let skipped = r.skipped.iter().map(|d| (d.vmid, &d.from));
            let unfinished = r.unfinished.iter().map(|u| (u.vmid, &u.from));
            failed
                .chain(skipped)
                .chain(unfinished)
                .filter(|(_, from)| from.as_str() == node)
                .map(|(vmid, _)| vmid)
                .collect()
        })
        .unwrap_or_default();
    stuck.sort_unstable();
    stuck.dedup();
    stuck
}

/// Why a freed node is not switched off: guests that did not move off it.
fn kept_on(node: &str, stuck: &[u32]) -> String {
    let list: Vec<String> = stuck.iter().map(u32::to_string).collect();
    format!(
        "guest(s) {} did not move off it; it stays in maintenance, marked off: rerun flxp \
         consolidate to finish (or give back) it, or --wake {node} to put it back in service",
        list.join(", ")
    )
}

/// The consolidation for people: the plan, then what it frees and why the others stay.
fn print(c: &Consolidation) {
    output::print_plan(&c.plan, &[]);
    output::say("");
    for f in &c.freed {
        output::say(format!(
            "free {}: {} migration(s) off it",
            f.node, f.migrations
        ));
    }
    for k in &c.kept {
        output::say(format!("keep {}: {}", k.node, k.reason));
    }
}

/// `--wake NODE`: Wake-on-LAN, wait until the node is online, clear its mark, rebalance.
fn wake(
    config: &Config,
    args: &Args,
    zone: &str,
    scheduler: &flxp_core::Scheduler,
) -> Result<ExitCode> {
    let Some(node) = args.wake.as_deref() else {
        return Ok(ExitCode::SUCCESS);
    };
    if args.run.dry_run {
        return Err(UsageError("--wake powers a node on: it has no --dry-run".into()).into());
    }
    // Before anything is written (the maintenance and power marks it clears).
    let work =
        async |executor: Executor, held: Option<&super::lease::Held>, _: Option<&LeaseKeeper>| {
            let api = executor.api().clone();
            wake_in_zone(executor, &api, args, zone, node, config, held).await
        };
    // Waking acts (powers a node on, clears marks, rebalances): never dry.
    let acting = super::lease::Acting {
        dry_run: false,
        ..args.run.acting("consolidate").naming(args.wake.as_slice())
    };
    super::lease::run_in_zone(config, zone, scheduler, acting, work)
}

/// How long after a shutdown was sent a node still showing online is taken to be going down,
/// in Proxmox's seconds: a node stopping its services takes a minute or two; one still up after
/// ten did not go down (an admin kept it, or the shutdown failed).
const SHUTDOWN_GRACE_SECS: i64 = 600;

/// Whether `node` is online now; `None` when the zone cannot be read.
async fn node_online(executor: &Executor, node: &str) -> Option<bool> {
    let m = executor.read().await.ok()?;
    m.node_named(node).map(|i| m.cluster.node(i).is_online())
}

/// `--wake` carried out, under the zone's lease when `[lease] enabled`.
async fn wake_in_zone(
    executor: Executor,
    api: &flxp_pve::Pve,
    args: &Args,
    zone: &str,
    node: &str,
    config: &Config,
    lease: Option<&super::lease::Held>,
) -> Result<ExitCode> {
    let poll = std::time::Duration::from_secs_f64(config.migration.poll_secs);
    let timeout = std::time::Duration::from_secs(args.wake_timeout);
    let (model, notes) = executor
        .read_with_notes()
        .await
        .with_context(|| format!("cannot read zone {zone}"))?;
    let idx = model.node_named(node).ok_or_else(|| {
        UsageError(format!(
            "node {node:?} is not in zone {zone}; nodes: {}",
            model.node_names()
        ))
    })?;
    let name = model.cluster.node(idx).name.clone();
    let mut already_online = model.cluster.node(idx).is_online();
    // Switched off moments ago, a node still shows online while it goes down: taken for one in
    // service, its marks would be cleared and guests sent to a node about to vanish.
    let switched_off = flxp_engine::power_mark::read(&notes)
        .into_iter()
        .filter(|m| m.node == name && m.state == flxp_engine::power_mark::PowerState::Off)
        .map(|m| m.since)
        .max()
        .filter(|since| executor.now() - since < SHUTDOWN_GRACE_SECS);
    if let (true, Some(since)) = (already_online, switched_off) {
        if !args.run.json {
            output::tell(format!(
                "{name} was switched off {} s ago and still shows online: waiting until it is off \
                 before Wake-on-LAN",
                executor.now() - since
            ));
        }
        while executor.now() - since < SHUTDOWN_GRACE_SECS {
            tokio::time::sleep(poll).await;
            if node_online(&executor, &name).await == Some(false) {
                already_online = false;
                break;
            }
        }
    }
    let mac = if already_online {
        if !args.run.json {
            output::tell(format!(
                "{name} is online already: no Wake-on-LAN sent; clearing its maintenance \
                     mark and rebalancing onto it"
            ));
        }
        String::new()
    } else {
        // Marked waking first (as the daemon does): should it boot after this run gave up, no
        // later consolidation takes it for one left unfinished and switches it off again.
        executor
            .mark_waking(&name, executor.now())
            .await
            .with_context(|| format!("cannot mark {name} as waking"))?;
        let mac = executor.wake(&name).await?;
        let woke = crate::notify::events::woken(zone, &name, "flxp consolidate --wake");
        crate::notify::send_once(config, "consolidate", vec![woke]).await;
        if !args.run.json {
            output::tell(format!(
                "{name}: Wake-on-LAN sent ({mac}); waiting until it is online"
            ));
        }
        let start = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(poll).await;
            if node_online(&executor, &name).await == Some(true) {
                break;
            }
            if start.elapsed() > timeout {
                anyhow::bail!(
                    "{name} is not online {} s after Wake-on-LAN; it is marked waking: once it \
                     is online, the daemon or `flxp consolidate --wake {name}` puts it back in \
                     service",
                    timeout.as_secs()
                );
            }
        }
        mac
    };
    flxp_engine::maintenance::set(api, &name, false).await?;
    executor.clear_power_mark(&name).await?;
    if !args.run.json {
        output::tell(format!(
            "{name}: online, maintenance mark cleared; rebalancing onto it"
        ));
    }
    // The one rebalance after a wake ignores the cooldown: the consolidation moved most guests.
    let goal = flxp_engine::consolidate::after_wake(&config.balance);
    let (plan, report) = balance::plan_and_run(
        executor,
        &goal,
        None,
        args.run.dry_run,
        args.run.json,
        zone,
        lease,
    )
    .await?;
    let unmet = crate::app::plan::unmet(&plan, &goal);
    let code = if report.as_ref().is_some_and(|r| !r.is_clean()) {
        ExitCode::from(1)
    } else if !unmet.is_empty() {
        ExitCode::from(super::UNSATISFIABLE)
    } else {
        ExitCode::SUCCESS
    };
    if args.run.json {
        output::print_json(&WakeOutput {
            node: &name,
            mac: &mac,
            already_online,
            plan: &plan,
            execution: report.as_ref(),
            unmet,
        })?;
    } else if let Some(r) = &report {
        output::print_execution(r);
    }
    Ok(code)
}

/// A progress line on stderr at most once a second while nodes are judged: silent on a
/// cluster planned in under a second, moving on a thousand nodes.
pub(crate) fn progress() -> impl Fn(Judged<'_>) + Send + Sync + 'static {
    let last = std::sync::Mutex::new(std::time::Instant::now());
    let freed = std::sync::atomic::AtomicUsize::new(0);
    move |j: Judged<'_>| {
        let so_far = freed.fetch_add(usize::from(j.kept.is_none()), Ordering::Relaxed)
            + usize::from(j.kept.is_none());
        let Ok(mut last) = last.lock() else { return };
        if last.elapsed() >= std::time::Duration::from_secs(1) {
            *last = std::time::Instant::now();
            crate::output::tell(format!(
                "node {}/{} judged: {} {}; {so_far} freed so far",
                j.index,
                j.total,
                j.node,
                j.kept
                    .map_or_else(|| "freed".to_owned(), |why| format!("kept: {why}")),
            ));
        }
    }
}
