//! The checks of a config that need more than its text (secrets in files and variables, the
//! plugins, each zone's client, each zone's lease node), in one place: `flxp serve` and `flxp daemon` run [`check`] at
//! start and `flxp config check` runs it too, so that what the check passes the commands start
//! with, and what they refuse the check refuses, with the same message.

use flxp_core::Scheduler;
use flxp_pve::Pve;

use crate::config::{Config, Role};

/// The environment variable holding an operator token for the API.
pub const TOKEN_ENV: &str = "FLXP_API_TOKEN";

/// The shortest API token accepted, in characters: a bearer token is the API's only credential,
/// and a short one is guessed.
pub const MIN_TOKEN_CHARS: usize = 16;

/// An accepted API token: its secret, role and the name the audit log records.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey {
    /// The bearer token itself.
    pub secret: String,
    /// What it may do.
    pub role: Role,
    /// Its configured name, `api.tokens[<i>]`, or `FLXP_API_TOKEN`: never the secret.
    pub name: String,
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiKey")
            .field("name", &self.name)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

/// What [`check`] found usable.
pub struct Checked {
    /// The API tokens with their roles, `[api].tokens` first, then `FLXP_API_TOKEN`.
    pub tokens: Vec<ApiKey>,
    /// The placement pipeline and balancing methods (the config's policies and plugins).
    pub scheduler: Scheduler,
}

impl std::fmt::Debug for Checked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checked")
            .field("tokens", &self.tokens.len())
            .finish_non_exhaustive()
    }
}

/// Every start check that needs no zone: the API tokens (readable, not empty, at least
/// [`MIN_TOKEN_CHARS`] long, each listed once), then [`check_engine`]. `env_token` is
/// `FLXP_API_TOKEN`'s value. What `flxp serve` runs, and `flxp config check`.
pub fn check(config: &Config, env_token: Option<&str>) -> anyhow::Result<Checked> {
    let tokens = api_tokens(config, env_token)?;
    let scheduler = check_engine(config)?;
    Ok(Checked { tokens, scheduler })
}

/// The start checks of what decides and acts: the scheduler (the placement pipeline with its
/// policies and plugins, the balancing methods), and the client of each zone (its secret
/// readable). What `flxp daemon` runs, which serves no API.
pub fn check_engine(config: &Config) -> anyhow::Result<Scheduler> {
    let scheduler = super::scheduler::builtin(config)?;
    for name in config.zones.keys() {
        config.client(name)?;
    }
    Ok(scheduler)
}

/// Why `flxp serve` would not start with these tokens (none at all), or `None`.
pub fn serve_refusal(tokens: &[ApiKey]) -> Option<String> {
    tokens.is_empty().then(|| {
        format!(
            "no API token: set [api].tokens in the config file or {TOKEN_ENV}, so that the API is not open to anyone"
        )
    })
}

/// Why `flxp daemon` would not start with this config (no zone to manage), or `None`.
pub fn daemon_refusal(config: &Config) -> Option<String> {
    (config.daemon.zones.is_empty() && config.zones.is_empty())
        .then(|| "the config file defines no zone to manage: add a [zones.<name>] table".to_owned())
}

/// A zone's `lease-node` as the cluster's membership (`GET /cluster/status`) shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseNode {
    /// A member, online.
    Online,
    /// A member, offline now: no replica can take the lease until it is back.
    Offline,
    /// Not a member: its notes cannot hold the lease, so no replica could ever act.
    Absent {
        /// The cluster's nodes.
        members: Vec<String>,
    },
}

impl LeaseNode {
    /// Why a config with this `lease-node` is refused, or `None`.
    pub fn problem(&self, node: &str) -> Option<String> {
        match self {
            Self::Absent { members } => Some(format!(
                "lease-node {node} is not a node of this cluster (its nodes: {})",
                members.join(", ")
            )),
            Self::Online | Self::Offline => None,
        }
    }
}

/// Where `node` stands in the cluster's membership.
pub async fn lease_node(api: &Pve, node: &str) -> Result<LeaseNode, flxp_pve::Error> {
    let status = api.cluster_status().await?;
    let member = status
        .iter()
        .find(|e| e.node_name() == Some(node))
        .map(|e| e.online.unwrap_or(false));
    Ok(match member {
        Some(true) => LeaseNode::Online,
        Some(false) => LeaseNode::Offline,
        None => LeaseNode::Absent {
            members: status
                .iter()
                .filter_map(|e| e.node_name().map(str::to_owned))
                .collect(),
        },
    })
}

/// The start check of each zone's `lease-node` (`flxp serve`, `flxp daemon`), as `flxp config
/// check` makes it: a node the cluster does not have is refused, placed at its key. A zone whose
/// membership cannot be read now is not a mistake in the file: logged, and the lease tells later.
pub async fn check_lease_nodes<'a>(
    config: &Config,
    zones: impl IntoIterator<Item = (&'a str, &'a Pve)>,
) -> anyhow::Result<()> {
    for (name, api) in zones {
        let Some(node) = config.zones.get(name).and_then(|z| z.lease_node.as_deref()) else {
            continue;
        };
        match lease_node(api, node).await {
            Ok(found) => {
                if let Some(problem) = found.problem(node) {
                    return Err(config.error_at(&format!("zones.{name}.lease-node"), problem));
                }
            }
            Err(e) => tracing::warn!(
                zone = name,
                error = %e,
                "cannot read the cluster membership to check lease-node {node}"
            ),
        }
    }
    Ok(())
}

/// The API tokens of `[api].tokens` and `FLXP_API_TOKEN` (an operator), each read and checked.
/// Errors name the token's position, never the token.
fn api_tokens(config: &Config, env_token: Option<&str>) -> anyhow::Result<Vec<ApiKey>> {
    let mut list: Vec<ApiKey> = Vec::new();
    // Positions by token and the names taken: a list of thousands is checked in linear time.
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut names: std::collections::HashSet<String> = std::collections::HashSet::new();
    let at = |i: usize, message: String| {
        config.error_at("api.tokens", format!("tokens[{i}]: {message}"))
    };
    for (i, t) in config.api.tokens.iter().enumerate() {
        let value = match (&t.value, &t.env, &t.file) {
            (Some(v), _, _) => v.clone(),
            (_, Some(var), _) => std::env::var(var)
                .map_err(|_| at(i, format!("environment variable {var} is not set")))?,
            (_, _, Some(file)) => std::fs::read_to_string(file)
                .map_err(|e| at(i, format!("cannot read {}: {e}", file.display())))?,
            _ => return Err(at(i, "give one of value, env or file".into())),
        };
        // A header value loses its surrounding blanks on the way: keep the token as it arrives.
        let value = value.trim();
        if value.is_empty() {
            return Err(at(i, "the token is empty".into()));
        }
        if value.chars().count() < MIN_TOKEN_CHARS {
            return Err(at(
                i,
                format!("the token is shorter than {MIN_TOKEN_CHARS} characters"),
            ));
        }
        if let Some(&j) = seen.get(value) {
            return Err(at(
                i,
                format!("the same token as tokens[{j}]: list each token once, with one role"),
            ));
        }
        let name = t.name.clone().unwrap_or_else(|| format!("api.tokens[{i}]"));
        if !names.insert(name.clone()) {
            return Err(at(
                i,
                format!("the name {name:?} is taken: give each token its own name"),
            ));
        }
        seen.insert(value.to_owned(), list.len());
        list.push(ApiKey {
            secret: value.to_owned(),
            role: t.role,
            name,
        });
    }
    if let Some(value) = env_token.map(str::trim).filter(|t| !t.is_empty()) {
        if value.chars().count() < MIN_TOKEN_CHARS {
            anyhow::bail!("{TOKEN_ENV}: the token is shorter than {MIN_TOKEN_CHARS} characters");
        }
        if let Some(&j) = seen.get(value) {
            anyhow::bail!(
                "{TOKEN_ENV}: the same token as api.tokens[{j}]: {TOKEN_ENV} is an operator token, list each token once"
            );
        }
        list.push(ApiKey {
            secret: value.to_owned(),
            role: Role::Operator,
            name: TOKEN_ENV.to_owned(),
        });
    }
    Ok(list)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may panic

    use std::path::Path;

    use super::*;

    const LONG: &str = "0123456789abcdef";

    fn tokens(text: &str, env: Option<&str>) -> Result<Vec<(String, Role)>, String> {
        let config = Config::parse(text, Path::new("flxp.toml")).unwrap();
        api_tokens(&config, env)
            .map(|list| list.into_iter().map(|k| (k.secret, k.role)).collect())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn tokens_are_named_by_their_name_or_position_and_a_name_is_given_once() {
        let config = Config::parse(
            &format!("[api]\ntokens = [{{ value = \"{LONG}\", name = \"ci\" }}, {{ value = \"{LONG}-v\", role = \"viewer\" }}]\n"),
            Path::new("flxp.toml"),
        )
        .unwrap();
        let names: Vec<String> = api_tokens(&config, Some("operator-from-the-env"))
            .unwrap()
            .into_iter()
            .map(|k| k.name)
            .collect();
        assert_eq!(names, ["ci", "api.tokens[1]", "FLXP_API_TOKEN"]);
        let config = Config::parse(
            &format!("[api]\ntokens = [{{ value = \"{LONG}\", name = \"ci\" }}, {{ value = \"{LONG}-v\", name = \"ci\" }}]\n"),
            Path::new("flxp.toml"),
        )
        .unwrap();
        assert_eq!(
            api_tokens(&config, None).unwrap_err().to_string(),
            "config file flxp.toml:2:1: api.tokens: tokens[1]: the name \"ci\" is taken: give each token its own name"
        );
    }

    #[test]
    fn tokens_are_read_with_their_roles() {
        let got = tokens(
            &format!("[api]\ntokens = [{{ value = \" {LONG}\\n\" }}, {{ value = \"{LONG}-v\", role = \"viewer\" }}]\n"),
            Some("operator-from-the-env"),
        )
        .unwrap();
        let want = [
            (LONG.to_owned(), Role::Operator),
            (format!("{LONG}-v"), Role::Viewer),
            ("operator-from-the-env".to_owned(), Role::Operator),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn a_token_listed_twice_or_too_short_is_an_error_naming_its_position_only() {
        let cases = [
            (
                format!(
                    "[api]\ntokens = [{{ value = \"{LONG}\", role = \"viewer\" }}, {{ value = \"{LONG}\" }}]\n"
                ),
                None,
                "config file flxp.toml:2:1: api.tokens: tokens[1]: the same token as tokens[0]: list each token once, with one role",
            ),
            (
                format!("[api]\ntokens = [{{ value = \"{LONG}\", role = \"viewer\" }}]\n"),
                Some(LONG),
                "FLXP_API_TOKEN: the same token as api.tokens[0]: FLXP_API_TOKEN is an operator token, list each token once",
            ),
            (
                "[api]\ntokens = [{ value = \"x\" }]\n".to_owned(),
                None,
                "config file flxp.toml:2:1: api.tokens: tokens[0]: the token is shorter than 16 characters",
            ),
            (
                "[api]\ntokens = [{ value = \"  \" }]\n".to_owned(),
                None,
                "config file flxp.toml:2:1: api.tokens: tokens[0]: the token is empty",
            ),
            (
                String::new(),
                Some("short"),
                "FLXP_API_TOKEN: the token is shorter than 16 characters",
            ),
        ];
        for (text, env, want) in cases {
            let e = tokens(&text, env).unwrap_err();
            assert_eq!(e, want, "{text}");
            assert!(!e.contains(LONG), "{e}");
        }
    }
}
