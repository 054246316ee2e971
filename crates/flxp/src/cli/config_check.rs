//! `flxp config check`: the config file, then per zone: reachable, certificate trusted, the
//! `lease-node` (when set) a member of the cluster, and the token holding every privilege the
//! zone's features need (named when missing).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use flxp_pve::privileges::{Feature, requirements};
use flxp_pve::types::PermissionsQuery;

use crate::config::Config;

/// Arguments of `flxp config`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Check the config file, then each zone's reachability, certificate and token privileges.
    Check(CheckArgs),
}

/// Arguments of `flxp config check`.
#[derive(Debug, clap::Args)]
struct CheckArgs {
    /// Config file (else FLXP_CONFIG, else /etc/flxp/flxp.toml).
    #[arg(long, value_name = "F", env = "FLXP_CONFIG")]
    config: Option<PathBuf>,
}

/// Runs `flxp config ...`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Command::Check(a) => check(a),
    }
}

fn check(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let path = Config::path(args.config.as_deref());
    // A mistake in the file is an error with its file:line, exactly as at start.
    let config = Config::load(&path)?;
    crate::output::say(format!("config {}: ok", path.display()));
    if config.zones.is_empty() {
        crate::output::say("no zones configured".to_owned());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let mut problems = 0;
    for name in config.zones.keys() {
        let features = zone_features(&config, name);
        for line in runtime.block_on(check_zone(&config, name, &features)) {
            if line.problem {
                problems += 1;
            }
            crate::output::say(format!("zone {name}: {}", line.text));
        }
    }
    if problems > 0 {
        crate::output::say(format!("{problems} problem(s) found"));
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// One finding about a zone.
struct Finding {
    text: String,
    problem: bool,
}

fn ok(text: String) -> Finding {
    Finding {
        text,
        problem: false,
    }
}

fn problem(text: String) -> Finding {
    Finding {
        text,
        problem: true,
    }
}

/// The features a zone is used for according to the config: read always; balance when the
/// daemon manages it and rebalances or evacuates; create when an image can be cloned in it.
pub fn zone_features(config: &Config, zone: &str) -> BTreeSet<Feature> {
    let mut features = BTreeSet::from([Feature::Read]);
    let d = &config.daemon;
    let managed = d.zones.is_empty() || d.zones.iter().any(|z| z == zone);
    if managed && (d.rebalance || d.evacuate) {
        features.insert(Feature::Balance);
    }
    if config
        .images
        .values()
        .any(|i| i.template.is_some() || i.zones.contains_key(zone))
    {
        features.insert(Feature::Create);
    }
    features
}

async fn check_zone(config: &Config, name: &str, features: &BTreeSet<Feature>) -> Vec<Finding> {
    let mut out = Vec::new();
    let client = match config.client(name) {
        Ok(c) => c,
        Err(e) => return vec![problem(e.to_string())],
    };
    let zone = config.zones.get(name);
    // `version` needs no privilege: a failure here is the connection, TLS or the credentials.
    match client.version().await {
        Ok(v) => {
            let trust = match zone {
                Some(z) if z.hosts.iter().all(|h| h.starts_with("http://")) => {
                    "plain HTTP, no certificate (simulator only)"
                }
                Some(z) if z.insecure => "certificate NOT checked (insecure = true)",
                Some(z) if z.fingerprint.is_some() => "certificate matches the pinned fingerprint",
                Some(z) if z.ca_file.is_some() => "certificate verified against ca-file",
                _ => "certificate verified against the system's roots",
            };
            out.push(ok(format!(
                "reachable, Proxmox VE {}, {trust}",
                v.version.as_deref().unwrap_or("(version unknown)")
            )));
        }
        Err(e) => {
            out.push(problem(format!("cannot connect: {e}")));
            return out;
        }
    }
    if let Some(node) = zone.and_then(|z| z.lease_node.as_deref()) {
        out.push(lease_node_finding(&client, node).await);
    }
    let names: Vec<&str> = features.iter().map(|f| f.name()).collect();
    let needed = requirements(features);
    let mut paths: Vec<&str> = needed.iter().map(|r| r.path).collect();
    paths.sort_unstable();
    paths.dedup();
    let mut missing = Vec::new();
    for path in paths {
        let query = PermissionsQuery {
            path: Some(path.to_owned()),
            userid: None,
        };
        let held = match client.permissions(&query).await {
            Ok(p) => p,
            Err(e) => {
                out.push(problem(format!(
                    "cannot read the token's privileges (GET /access/permissions): {e}"
                )));
                return out;
            }
        };
        for r in needed.iter().filter(|r| r.path == path) {
            if !held.has(path, r.privilege) {
                missing.push(*r);
            }
        }
    }
    if missing.is_empty() {
        out.push(ok(format!(
            "token has every privilege for {}",
            names.join(", ")
        )));
    }
    for r in missing {
        out.push(problem(format!(
            "missing privilege {} on {} (needed for {}: {})",
            r.privilege,
            r.path,
            r.feature.name(),
            r.why
        )));
    }
    out
}

/// Whether the configured lease node is a cluster member: a misspelt one would leave every
/// replica unable to take the lease (its notes cannot be written), which the file alone can't show.
async fn lease_node_finding(client: &flxp_pve::Client, node: &str) -> Finding {
    let status = match client.cluster_status().await {
        Ok(s) => s,
        Err(e) => {
            return problem(format!(
                "cannot read the cluster membership (GET /cluster/status) to check lease-node {node}: {e}"
            ));
        }
    };
    let members: Vec<(&str, bool)> = status
        .iter()
        .filter_map(|e| Some((e.node_name()?, e.online.unwrap_or(false))))
        .collect();
    match members.iter().find(|(m, _)| *m == node) {
        Some((_, true)) => ok(format!("lease-node {node} is a member of the cluster")),
        // Not a mistake in the file, but while it lasts no replica can take or renew the lease.
        Some((_, false)) => ok(format!(
            "lease-node {node} is a member of the cluster, but offline now: \
             no replica can take the lease until it is back"
        )),
        None => {
            let names: Vec<&str> = members.iter().map(|(m, _)| *m).collect();
            problem(format!(
                "lease-node {node} is not a node of this cluster (its nodes: {})",
                names.join(", ")
            ))
        }
    }
}
