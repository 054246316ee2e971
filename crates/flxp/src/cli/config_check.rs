//! `flxp config check`: the config file and every check `flxp serve` and `flxp daemon` make at
//! start ([`startup::check`]: API tokens, plugins, secrets), then per zone: reachable,
//! certificate trusted, the `lease-node` (when set) a member of the cluster, the token holding
//! every privilege the zone's features need (named when missing); then the checks `serve` makes
//! against the live zones (storages, templates, overrides), and warnings for per-node settings
//! naming a node of no zone.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use flxp_pve::privileges::{Feature, acls, granted, requirements};
use flxp_pve::types::PermissionsQuery;

use flxp_core::Cluster;

use crate::app::preflight;
use crate::app::startup;
use crate::config::Config;

/// The subcommands of `flxp config`.
#[derive(Debug, clap::Subcommand)]
pub enum Args {
    /// Check the config file, then each zone's reachability, certificate and token privileges.
    Check(CheckArgs),
}

/// Arguments of `flxp config check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Config file (else FLXP_CONFIG, else /etc/flxp/flxp.toml).
    #[arg(long, value_name = "F", env = "FLXP_CONFIG")]
    config: Option<PathBuf>,
}

/// Runs `flxp config ...`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args {
        Args::Check(a) => check(a),
    }
}

fn check(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let path = Config::path(args.config.as_deref());
    // A mistake in the file is an error with its file:line, exactly as at start.
    let config = Config::load(&path)?;
    // Every check `flxp serve` and `flxp daemon` make at start, with their messages.
    let env_token = std::env::var(startup::TOKEN_ENV).ok();
    let checked = startup::check(&config, env_token.as_deref())?;
    crate::output::say(format!("config {}: ok", path.display()));
    let mut problems = 0;
    if config.zones.is_empty() {
        // Nothing to check is not "ok": the shipped config has every zone commented out.
        problems += 1;
        crate::output::say(format!(
            "no zones configured: nothing to check. Add a [zones.NAME] table with hosts, token and \
             token-secret-file to {} (flxp.toml(5); `flxp setup token` creates the token)",
            path.display()
        ));
    }
    // Refusals of one command only: a config for the other one alone is not wrong.
    if let Some(refusal) = startup::serve_refusal(&checked.tokens) {
        crate::output::say(format!("note: flxp serve would refuse to start: {refusal}"));
    }
    if let Err(e) = crate::audit::AuditLog::check(&config.audit) {
        crate::output::say(format!("note: flxp serve would refuse to start: {e:#}"));
    }
    if let Some(refusal) = startup::daemon_refusal(&config) {
        crate::output::say(format!(
            "note: flxp daemon would refuse to start: {refusal}"
        ));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let mut read = Vec::new();
    for name in config.zones.keys() {
        let features = zone_features(&config, name);
        let (findings, cluster) = runtime.block_on(check_zone(&config, name, &features));
        for line in findings {
            if line.problem {
                problems += 1;
            }
            crate::output::say(format!("zone {name}: {}", line.text));
        }
        read.extend(cluster.map(|c| (name.as_str(), c)));
    }
    // What `flxp serve` checks against the zones at start, on the zones that could be read.
    let clusters: preflight::Clusters = read.iter().map(|(n, c)| (*n, c)).collect();
    if let Err((key, message)) = preflight::check_catalog(&config, &clusters) {
        problems += 1;
        crate::output::say(format!("{:#}", config.error_at(&key, message)));
    }
    for w in preflight::unknown_nodes(&config, &clusters) {
        crate::output::say(format!("warning: {w}"));
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
/// daemon manages it and rebalances or evacuates; power (and so balance) when consolidation
/// switches nodes off (`[consolidate] shutdown`) or the daemon saves power (`enabled`); create
/// when an image can be cloned in it.
pub fn zone_features(config: &Config, zone: &str) -> BTreeSet<Feature> {
    let mut features = BTreeSet::from([Feature::Read]);
    let d = &config.daemon;
    let managed = d.zones.is_empty() || d.zones.iter().any(|z| z == zone);
    if managed && (d.rebalance || d.evacuate) {
        features.insert(Feature::Balance);
    }
    let c = &config.consolidate;
    if c.shutdown || (managed && c.enabled) {
        features.insert(Feature::Power);
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

/// The findings about zone `name`, and its cluster when it could be read.
async fn check_zone(
    config: &Config,
    name: &str,
    features: &BTreeSet<Feature>,
) -> (Vec<Finding>, Option<Cluster>) {
    let client = match config.client(name) {
        Ok(c) => c,
        Err(e) => return (vec![problem(e.to_string())], None),
    };
    let mut out = check_access(config, name, &client, features).await;
    if out.iter().any(|f| f.problem) {
        return (out, None);
    }
    let read = flxp_engine::collect_snapshot(&client, flxp_engine::epoch_now())
        .await
        .map_err(|e| e.to_string())
        .and_then(|s| Cluster::from_snapshot(&s, &Default::default()).map_err(|e| e.to_string()));
    match read {
        Ok(cluster) => (out, Some(cluster)),
        Err(e) => {
            out.push(problem(format!("cannot read the cluster: {e}")));
            (out, None)
        }
    }
}

/// Reachability, certificate, lease node and privileges of zone `name`.
async fn check_access(
    config: &Config,
    name: &str,
    client: &flxp_pve::Client,
    features: &BTreeSet<Feature>,
) -> Vec<Finding> {
    let mut out = Vec::new();
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
        out.push(lease_node_finding(client, node).await);
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
    out.extend(beyond_need(client, features, &names).await);
    out
}

/// Privileges the token holds beyond what the zone's features need, path by path (a note, not a
/// problem: least privilege is the admin's call). Held is what `GET /access/permissions` reports
/// for every path; needed is what `flxp setup token` grants there.
async fn beyond_need(
    client: &flxp_pve::Client,
    features: &BTreeSet<Feature>,
    names: &[&str],
) -> Vec<Finding> {
    let query = PermissionsQuery {
        path: None,
        userid: None,
    };
    let Ok(held) = client.permissions(&query).await else {
        return Vec::new();
    };
    let acls = acls(features);
    let mut out = Vec::new();
    for (path, privs) in &held.0 {
        let needed = granted(&acls, path);
        // The value is whether it propagates; held either way.
        let extra: Vec<&str> = privs
            .keys()
            .map(String::as_str)
            .filter(|p| !needed.contains(p))
            .collect();
        if !extra.is_empty() {
            out.push(ok(format!(
                "note: token holds {} on {path} beyond what {} need{} (`flxp setup token` grants only what is needed)",
                extra.join(", "),
                names.join(", "),
                if names.len() == 1 { "s" } else { "" },
            )));
        }
    }
    out
}

/// Whether the configured lease node is a cluster member: a misspelt one would leave every
/// replica unable to take the lease (its notes cannot be written), which the file alone can't
/// show. `flxp serve` and `flxp daemon` refuse it at start ([`startup::check_lease_nodes`]).
async fn lease_node_finding(client: &flxp_pve::Client, node: &str) -> Finding {
    let api: flxp_pve::Pve = client.clone().into();
    match startup::lease_node(&api, node).await {
        Err(e) => problem(format!(
            "cannot read the cluster membership (GET /cluster/status) to check lease-node {node}: {e}"
        )),
        Ok(startup::LeaseNode::Online) => {
            ok(format!("lease-node {node} is a member of the cluster"))
        }
        // Not a mistake in the file, but while it lasts no replica can take or renew the lease.
        Ok(startup::LeaseNode::Offline) => ok(format!(
            "lease-node {node} is a member of the cluster, but offline now: \
             no replica can take the lease until it is back"
        )),
        Ok(absent) => problem(absent.problem(node).unwrap_or_default()),
    }
}
