//! `flxp maintenance NODE --zone Z [--off]`: set or clear the `flxp.maintenance` token in a node's
//! notes, as `flxp evacuate` sets it; clearing removes exact `flxp.maintenance` tokens only. A mark
//! makes the acting flxp empty the node (or fill it again), so it is written under the zone's
//! lease, as every run that acts.

use std::process::ExitCode;

use anyhow::{Context, Result};

use super::{UsageError, load};

/// Arguments of `flxp maintenance`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The node.
    #[arg(value_name = "NODE")]
    node: String,
    /// The zone of the config file the node is in.
    // Needed all the same, but not `required` to clap's parser: it checks before it hands the
    // subcommand a `--zone` given ahead of it (`flxp --zone Z ...`); `run` refuses a missing one.
    #[arg(long, value_name = "Z")]
    zone: Option<String>,
    /// Clear the mark instead of setting it.
    #[arg(long)]
    off: bool,
    /// Config file (else FLXP_CONFIG, else /etc/flxp/flxp.toml).
    #[arg(long, value_name = "F", env = "FLXP_CONFIG")]
    config: Option<std::path::PathBuf>,
    /// When another flxp acts on the zone (holds its lease), wait up to SECS seconds for it
    /// instead of refusing at once.
    #[arg(long, value_name = "SECS")]
    wait: Option<u64>,
}

/// Runs `flxp maintenance`: prints whether the notes changed.
pub fn run(args: Args) -> Result<ExitCode> {
    let zone = super::required_zone(args.zone.as_deref(), "maintenance")?.to_owned();
    let source = super::SourceArgs {
        from_file: None,
        zone: Some(zone.clone()),
        config: args.config.clone(),
    };
    let config = load::config(&source)?;
    config.zone(&zone).map_err(UsageError::from)?;
    let api: flxp_pve::Pve = config.client(&zone)?.into();
    let on = !args.off;
    let acting = super::lease::Acting {
        command: "maintenance",
        dry_run: false,
        wait: args.wait.map(std::time::Duration::from_secs),
    };
    let changed = super::lease::under_lease(&config, &zone, &api, acting, async |_, _| {
        let nodes = api
            .nodes()
            .await
            .with_context(|| format!("cannot read zone {zone}"))?;
        let node = nodes
            .into_iter()
            .map(|n| n.node)
            .find(|n| n.eq_ignore_ascii_case(&args.node))
            .ok_or_else(|| UsageError(format!("node {:?} is not in zone {}", args.node, zone)))?;
        anyhow::Ok(flxp_engine::maintenance::set(&api, &node, on).await?)
    })?;
    crate::output::tell(match (on, changed) {
        (true, true) => format!("{}: flxp.maintenance added to its notes", args.node),
        (true, false) => format!("{}: already in maintenance", args.node),
        (false, true) => format!("{}: flxp.maintenance removed from its notes", args.node),
        (false, false) => format!("{}: no flxp.maintenance token in its notes", args.node),
    });
    Ok(ExitCode::SUCCESS)
}
