//! `flxp balance`: plan the live migrations that fix broken rules and restore balance, and carry
//! them out in a zone (unless `--dry-run`; `--from-file` always only plans).
//!
//! The way a plan is carried out is shared with `flxp evacuate` ([`carry_out`]): progress on
//! stderr, Ctrl-C starts nothing new and waits for running migrations, the report after.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use flxp_core::Scheduler;
use flxp_core::balance::{MethodName, Plan, Registry, UsageChoice};
use flxp_engine::{ExecutionReport, Executor, Goal, LeaseKeeper, Model, planning};
use tracing::instrument::WithSubscriber;

use super::{RunArgs, SourceArgs, UNSATISFIABLE, UsageError, load};
use crate::app::plan::{unmet, unmet_leaving};
use crate::config::Config;
use crate::{output, progress};

/// Arguments of `flxp balance`.
// The doc comments are the `--help` texts: `[balance]`/`[api]` there name config-file sections, not
// items to link to.
#[allow(rustdoc::broken_intra_doc_links)]
#[derive(Debug, clap::Args)]
// A negative number is a value the parser names its option for, not an unknown flag.
#[command(allow_negative_numbers = true)]
pub struct Args {
    #[command(flatten)]
    pub(crate) run: RunArgs,
    /// How balancing moves are chosen: set with its value parser from a registry by
    /// [`with_methods`], which lists the registered methods.
    #[arg(long, value_name = "M", help = method_help(), value_parser = method_parser(Registry::builtin()))]
    pub(crate) method: Option<MethodArg>,
    /// Most migrations in the plan, rule fixes included (default from [balance], else 20).
    #[arg(long, value_name = "N")]
    max_migrations: Option<usize>,
    /// What the pve-* methods balance on: auto follows the cluster's crs option (static for
    /// ha=static, else dynamic); static = configured CPUs and memory of the guests, dynamic =
    /// measured usage (default from [balance], else auto).
    #[arg(long, value_name = "U", value_parser = usage_parser())]
    usage: Option<UsageChoice>,
    /// Thorough mode: spend up to this many seconds looking for a plan with fewer migrations and
    /// bytes reaching the same balance (default from [balance] effort-secs, else 0: off).
    #[arg(long, value_name = "SECONDS", value_parser = effort_parser)]
    effort: Option<f64>,
    /// What one soft rule (preferred node, soft affinity, prefer-no taint) is worth in imbalance
    /// (pp of spread, or CV): a balancing move may leave N more soft rules unmet when it lowers
    /// the imbalance by N × W; 0 ignores soft rules (default from [balance] soft-weight, else
    /// never traded).
    #[arg(long, value_name = "W", value_parser = soft_weight_parser)]
    soft_weight: Option<f64>,
}

/// Parses `--effort`: bad usage (exit 2) is caught here, with the range of `effort-secs`.
pub(super) fn effort_parser(text: &str) -> std::result::Result<f64, String> {
    text.parse::<f64>()
        .ok()
        .filter(|s| (0.0..=86_400.0).contains(s))
        .ok_or_else(|| "must be a number of seconds from 0 to 86400 (as effort-secs)".to_owned())
}

/// Parses `--soft-weight`: bad usage (exit 2) is caught here, with the range of `soft-weight`.
fn soft_weight_parser(text: &str) -> std::result::Result<f64, String> {
    text.parse::<f64>()
        .ok()
        .filter(|w| w.is_finite() && *w >= 0.0)
        .ok_or_else(|| "must be a number ≥ 0 (as soft-weight)".to_owned())
}

/// Parses `--usage`.
fn usage_parser() -> impl clap::builder::TypedValueParser<Value = UsageChoice> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(UsageChoice::ALL.map(UsageChoice::as_str)).try_map(
        |name: String| {
            // The possible values come from ALL, so this only fails if the two lists drift.
            UsageChoice::from_name(&name).ok_or_else(|| format!("unknown usage {name:?}"))
        },
    )
}

/// `--method`'s value, read before the config: a method of the command line's registry, or
/// another name, which may be a balance plugin of the config (checked once it is read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MethodArg {
    /// A method the registry holds.
    Registered(MethodName),
    /// A name the registry lacks.
    Other(String),
}

impl MethodArg {
    /// The name as typed.
    pub(crate) fn as_str(&self) -> &str {
        match self {
            Self::Registered(name) => name.as_str(),
            Self::Other(name) => name,
        }
    }
}

/// `--method`'s help line; the registered methods follow it, listed by its value parser.
fn method_help() -> String {
    format!(
        "How balancing moves are chosen (default from [balance], else {}): one of the possible \
         values, or a balance plugin from the config",
        MethodName::default()
    )
}

/// Parses `--method` against a registry, whose names and descriptions `--help` lists. Any other
/// name passes, to be checked once the config, whose balance plugins are methods too, is read.
pub(crate) fn method_parser(
    registry: &'static Registry,
) -> impl clap::builder::TypedValueParser<Value = MethodArg> {
    MethodParser(registry)
}

/// [`method_parser`]'s parser.
#[derive(Clone, Copy)]
struct MethodParser(&'static Registry);

impl clap::builder::TypedValueParser for MethodParser {
    type Value = MethodArg;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> std::result::Result<MethodArg, clap::Error> {
        let name = clap::builder::StringValueParser::new().parse_ref(cmd, arg, value)?;
        Ok(match self.0.parse(&name) {
            Ok(registered) => MethodArg::Registered(registered),
            Err(_) => MethodArg::Other(name),
        })
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(self.0.iter().map(|m| {
            clap::builder::PossibleValue::new(m.as_str()).help(m.description())
        })))
    }
}

/// `flxp balance` with `--method` parsed against `registry` and its help listing that registry.
pub(crate) fn with_methods(cmd: clap::Command, registry: &'static Registry) -> clap::Command {
    cmd.mut_arg("method", |a| {
        a.help(method_help()).value_parser(method_parser(registry))
    })
}

/// "a", "a and b", "a, b and c".
fn and_list(names: &[&str]) -> String {
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        Some((last, _)) => (*last).to_owned(),
        None => String::new(),
    }
}

/// Runs `flxp balance`.
pub fn run(args: Args) -> Result<ExitCode> {
    let config = load::config(&args.run.source)?;
    let mut options = config.balance.clone();
    // Built here only when `--method` or `--usage` asks about the methods (the config's balance
    // plugins are methods too), else before planning, as `evacuate` does.
    let scheduler = if args.method.is_some() || args.usage.is_some() {
        Some(load::scheduler(&config)?)
    } else {
        None
    };
    let methods = scheduler.as_ref().map(Scheduler::methods);
    if let (Some(arg), Some(methods)) = (&args.method, &methods) {
        let m = arg.as_str();
        options.method = methods.parse(m).map_err(|_| {
            if let Some(p) = config.plugin.iter().find(|p| p.name == m) {
                // A filter or score plugin is no method: say what it is and where it belongs.
                return UsageError(format!(
                    "--method {m}: plugin {m:?} is a {} plugin, not a balance plugin; {}",
                    p.kind.as_str(),
                    if p.kind == flxp_core::plugin::PluginKind::Score {
                        "weigh it in a policy ([policies.NAME])"
                    } else {
                        "filter plugins run in every placement by themselves"
                    }
                ));
            }
            let known: Vec<&str> = methods.names().collect();
            UsageError(format!(
                "invalid value '{m}' for '--method <M>' (possible values: {})",
                known.join(", ")
            ))
        })?;
    }
    if let Some(n) = args.max_migrations {
        options.max_migrations = n;
    }
    if let (Some(u), Some(methods)) = (args.usage, methods) {
        options.usage = u;
        let reads = methods
            .get(options.method.as_str())
            .is_some_and(|m| m.reads_usage());
        if !reads {
            // Said, not refused: the flag may come from a wrapper script that also picks methods.
            let readers: Vec<&str> = methods
                .iter()
                .filter(|m| m.reads_usage())
                .map(|m| m.as_str())
                .collect();
            let who = if readers.is_empty() {
                "no method balances on it".to_owned()
            } else {
                format!("only {} balance on it", and_list(&readers))
            };
            crate::output::tell(format!(
                "warning: --usage is ignored by method {}: {who}",
                options.method,
            ));
        }
    }
    if let Some(secs) = args.effort {
        options.effort_secs = secs;
        options.validate()?;
    }
    if let Some(w) = args.soft_weight {
        options.soft_weight = Some(w);
        options.validate()?;
    }
    let goal = Goal::Balance(options);
    let scheduler = match scheduler {
        Some(s) => s,
        None => load::scheduler(&config)?,
    };
    carry_out(
        &args.run.source,
        &config,
        &scheduler,
        &goal,
        args.run.acting("balance"),
        args.run.json,
    )
}

/// Plans `goal` on the source and, for a zone without `--dry-run`, carries it out; prints the plan
/// and the report; the exit code: 1 when a migration failed or the round stopped early, 3 when
/// the plan leaves the request unmet, else 0.
pub fn carry_out(
    source: &SourceArgs,
    config: &Config,
    scheduler: &Scheduler,
    goal: &Goal,
    acting: super::lease::Acting<'_>,
    json: bool,
) -> Result<ExitCode> {
    let dry_run = acting.dry_run;
    let placer = scheduler.placer(source.zone.as_deref());
    let (plan, execution, left) = match (&source.from_file, &source.zone) {
        (Some(path), _) => {
            let model = load::model_to_plan(path)?;
            let plan = plan_on(&model, &placer, goal)?;
            let left = crate::app::left::on_model(&model, goal, &plan, None);
            (plan, None, left)
        }
        (None, Some(zone)) => {
            // Before anything is written: evacuate's maintenance mark too.
            let work = async |executor: Executor,
                              held: Option<&super::lease::Held>,
                              _: Option<&LeaseKeeper>| {
                let reader = executor.clone();
                let (plan, report) =
                    plan_and_run(executor, goal, None, dry_run, json, zone, held).await?;
                // Read again: what runs on the emptied nodes now, whatever the plan meant.
                let left = crate::app::left::in_zone(&reader, goal, &plan, report.as_ref()).await;
                if !dry_run {
                    let events =
                        crate::notify::events::from_run(zone, goal, &plan, report.as_ref(), &left);
                    crate::notify::send_once(config, acting.command, events).await;
                }
                Ok((plan, report, left))
            };
            super::lease::run_in_zone(config, zone, scheduler, acting, work)?
        }
        (None, None) => return Err(load::no_cluster()),
    };
    let dry = execution.is_none();
    // After a run, the nodes still over their memory are those the cluster read again shows,
    // not those the plan expected.
    let after_run = execution.as_ref().and_then(|r| r.overfull.as_deref());
    let overfull = after_run.unwrap_or(&plan.overfull);
    let mut why = unmet_leaving(&plan, goal, overfull);
    why.extend(crate::app::left::phrase(&left, !dry));
    let code = match &execution {
        Some(r) if !r.is_clean() => 1,
        _ if !why.is_empty() => UNSATISFIABLE,
        _ => 0,
    };
    if json {
        output::print_json(&output::PlanOutput {
            plan: &plan,
            dry_run: dry,
            execution: execution.as_ref(),
            unmet: why.clone(),
            left_running: &left,
        })?;
    } else if let Some(report) = &execution {
        output::print_execution(report);
        crate::app::left::print(&left, true);
        let after = after_run.and_then(crate::app::plan::overfull_phrase);
        for p in after
            .into_iter()
            .chain(crate::app::left::phrase(&left, true))
        {
            // A run that stopped early or saw a migration fail exits 1, which says more.
            output::say(format!("not met (exit code {code}): {p}"));
        }
    } else if source.from_file.is_some() {
        output::print_plan(&plan, &why);
        crate::app::left::print(&left, false);
    } else {
        // A dry run in a zone printed its plan before this read.
        crate::app::left::print(&left, false);
    }
    Ok(ExitCode::from(code))
}

/// Plans on a model; an unknown node is a usage error.
fn plan_on(model: &Model, placer: &flxp_core::placement::Placer, goal: &Goal) -> Result<Plan> {
    match planning::plan(model, placer, goal, None) {
        Err(e @ flxp_engine::Error::UnknownNode { .. }) => Err(UsageError(e.to_string()).into()),
        other => Ok(other?),
    }
}

/// Reads the zone and plans (unless `planned` is given), prints the plan for people, and carries
/// it out unless dry; with a lease (taken by the caller before anything was written), it stops
/// starting migrations when the lease lapses.
pub(crate) async fn plan_and_run(
    executor: Executor,
    goal: &Goal,
    planned: Option<Plan>,
    dry_run: bool,
    json: bool,
    zone: &str,
    lease: Option<&super::lease::Held>,
) -> Result<(Plan, Option<ExecutionReport>)> {
    let planned_here = planned.is_none();
    let plan = match planned {
        Some(plan) => plan,
        None => match executor.plan(goal).await {
            Err(e @ flxp_engine::Error::UnknownNode { .. }) => {
                return Err(UsageError(e.to_string()).into());
            }
            other => other.with_context(|| format!("cannot plan in zone {zone}"))?,
        },
    };
    if !json {
        let mut why = unmet(&plan, goal);
        // An evacuation that would leave a running guest says so first.
        let left = crate::app::left::in_zone(&executor, goal, &plan, None).await;
        why.extend(crate::app::left::phrase(&left, false));
        output::print_plan(&plan, &why);
    }
    if let (Goal::Evacuate { nodes, .. }, false) = (goal, dry_run) {
        // A plan handed in is a consolidation's: its guests have no home to go back to.
        if planned_here {
            record_homes(&executor, nodes).await;
        }
        mark_maintenance(&executor, nodes).await;
    }
    // A plan without migrations is still carried out while a migration in flight that the
    // goal depends on has to be waited for, or a guest came onto a node being emptied.
    let idle =
        plan.migrations.is_empty() && !executor.unsettled(&plan, goal).await.unwrap_or(false);
    if dry_run || idle {
        return Ok((plan, None));
    }
    let bars = progress::on_stderr();
    let mut executor = super::lease::stoppable(executor, lease);
    if let Some(b) = &bars {
        executor = executor.with_progress(Arc::clone(b) as Arc<dyn flxp_engine::Progress>);
    }
    let round = executor.execute(plan.clone(), goal);
    let report = match &bars {
        // Log lines go above the bars while they are drawn.
        Some(b) => round.with_subscriber(b.log_dispatch()).await,
        None => round.await,
    };
    Ok((plan, Some(report)))
}

/// Records in the notes of each node an evacuation empties the guests now on it, so that they go
/// back once its maintenance ends; a node whose notes cannot be written is still emptied, with a
/// warning.
async fn record_homes(executor: &Executor, nodes: &[String]) {
    for node in nodes {
        if let Err(e) = executor.record_homes(node).await {
            output::tell(format!(
                "warning: where the guests of {node} come from is not recorded (they will not go \
                 back by themselves): {}",
                flxp_engine::error_chain(&e)
            ));
        }
    }
}

/// Marks the nodes an evacuation empties as in maintenance in their notes, so that no later round
/// fills them again; a node whose notes cannot be written is still emptied, with a warning.
async fn mark_maintenance(executor: &Executor, nodes: &[String]) {
    let names: Vec<String> = match executor.read().await {
        Ok(model) => nodes
            .iter()
            .map(|n| {
                model
                    .cluster
                    .node_idx_loose(n)
                    .map_or_else(|| n.clone(), |i| model.cluster.node(i).name.clone())
            })
            .collect(),
        Err(_) => nodes.to_vec(),
    };
    for node in &names {
        if let Err(e) = flxp_engine::maintenance::set(executor.api(), node, true).await {
            output::tell(format!(
                "warning: {node} is not marked in its notes (a later round may fill it again): {}",
                flxp_engine::error_chain(&e)
            ));
        }
    }
}
