//! `flxp place`: choose the best node for a new VM, and explain why.

use std::process::ExitCode;

use anyhow::Result;
use flxp_core::placement::PlacementRequest;

use super::{SourceArgs, UNSATISFIABLE, UsageError, load};
use crate::{output, size};

/// Arguments of `flxp place`.
#[derive(Debug, clap::Args)]
// A negative number is a value the parser names its option for, not an unknown flag.
#[command(allow_negative_numbers = true)]
pub struct Args {
    #[command(flatten)]
    pub(crate) source: SourceArgs,
    /// Memory of the new VM: 4GiB, 4G, 4096M or bytes (binary units).
    // `-5G` is not a number to clap: without hyphen values it would read as flags `-5 -G`.
    #[arg(long, value_name = "SIZE", value_parser = size::parse, allow_hyphen_values = true,
        required_unless_present = "profile")]
    memory: Option<u64>,
    /// vCPUs of the new VM: a whole count, or a fraction of a CPU such as 0.5 (a container's
    /// cpulimit).
    #[arg(long, value_name = "N", value_parser = flxp_core::placement::parse_cores, allow_hyphen_values = true,
        required_unless_present = "profile")]
    cores: Option<f64>,
    /// A compute profile of the config (`[compute-profiles.<id>]`): its memory and vCPUs
    /// (cores × sockets) instead of --memory and --cores, as `createVM` takes them.
    #[arg(long, value_name = "ID", conflicts_with_all = ["memory", "cores"])]
    profile: Option<String>,
    /// A tag the VM will carry (repeatable; flxp rules such as flxp.anti-affinity.web).
    #[arg(long = "tag", value_name = "T")]
    tags: Vec<String>,
    /// Place on this node: skips scoring, not the online and resource checks.
    #[arg(long, value_name = "NODE")]
    host: Option<String>,
    /// Placement policy: free-memory (default), free-cpu, least-loaded, spread, pack, pve-static,
    /// pve-dynamic, or one defined in the config file.
    #[arg(long, value_name = "P")]
    policy: Option<String>,
    /// Show every node's verdict: failed filters with the numbers, or its score per scorer.
    #[arg(long)]
    explain: bool,
    /// Print one JSON document on stdout.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Runs `flxp place`.
pub fn run(args: Args) -> Result<ExitCode> {
    let config = load::config(&args.source)?;
    let loaded = load::load(&args.source, &config)?;
    let placer = load::scheduler(&config)?.placer(args.source.zone.as_deref());
    let (memory, cores) = match (&args.profile, args.memory, args.cores) {
        (Some(id), _, _) => config
            .profile_size(id)
            .map_err(|e| UsageError(e.to_string()))?,
        (None, Some(memory), Some(cores)) => (memory, cores),
        // clap requires both without --profile.
        _ => return Err(UsageError("give --profile, or --memory and --cores".to_owned()).into()),
    };
    let request = PlacementRequest {
        memory,
        cores,
        tags: args.tags,
        host: args.host,
        policy: args.policy,
    };
    let decision = placer
        .place(&loaded.cluster, &loaded.rules, &loaded.state, &request)
        .map_err(|e| match e {
            // Every request field is a flag the user typed (--tag, --host, --policy): bad usage,
            // exit 2, like an unknown node for `evacuate`.
            flxp_core::Error::Request(_)
            | flxp_core::Error::UnknownHost { .. }
            | flxp_core::Error::Option { .. } => anyhow::Error::from(UsageError(e.to_string())),
            other => other.into(),
        })?;
    if args.json {
        output::print_json(&decision)?;
    } else {
        output::print_placement(&decision, args.explain);
        if args.explain && decision.policy != "host" {
            if let Ok(policy) = placer.policy_def(&decision.policy) {
                let plugins: Vec<&str> = config.plugin.iter().map(|p| p.name.as_str()).collect();
                output::say(format!("\n{}", policy_line(policy, &plugins)));
            }
        }
    }
    Ok(match decision.node {
        Some(_) => ExitCode::SUCCESS,
        None => ExitCode::from(UNSATISFIABLE),
    })
}

/// The policy's weights for `--explain`, its own scorers apart from the soft-rule scorers every
/// policy carries unless it sets them to 0 (custom ones too, on purpose: a preference decides
/// unless it cannot be met).
fn policy_line(policy: &flxp_core::placement::Policy, plugins: &[&str]) -> String {
    use flxp_core::placement::SOFT_RULES;
    let own: Vec<String> = policy
        .weights
        .iter()
        .filter(|(n, w)| **w > 0.0 && !SOFT_RULES.contains(&n.as_str()))
        .map(|(n, w)| {
            let plugin = if plugins.contains(&n.as_str()) {
                " (plugin)"
            } else {
                ""
            };
            format!("{n} {w}{plugin}")
        })
        .collect();
    let soft: Vec<String> = SOFT_RULES
        .iter()
        .filter_map(|s| Some((s, policy.weights.get(*s).copied()?)))
        .filter(|(_, w)| *w > 0.0)
        .map(|(s, w)| format!("{s} {w}"))
        .collect();
    let soft = if soft.is_empty() {
        "all set to 0".to_owned()
    } else {
        soft.join(", ")
    };
    format!(
        "policy {}: {}; soft rules added to every policy unless set to 0: {soft}",
        policy.name,
        own.join(", ")
    )
}
