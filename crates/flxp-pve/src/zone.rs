//! One `[zones.<name>]` table of flxp's TOML config: a Proxmox cluster's hosts, auth and TLS.
//!
//! ```toml
//! [zones.eu-central]
//! hosts = ["pve1.example.com", "pve2.example.com:8006"]
//! token = "flxp@pve!scheduler"
//! token-secret-file = "/etc/flxp/eu-central.token"
//! fingerprint = "AA:BB:...:FF"     # or a list, one per node; or ca-file = "/etc/flxp/pve-root-ca.pem"
//! timeout-secs = 30
//! ```
//!
//! Secrets come inline, from an environment variable (`*-env`) or from a file (`*-file`), exactly
//! one of them. Env and file secrets are read when the client is built, so the config can be
//! checked ([`ZoneConfig::validate`]) without them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::Secret;
use crate::auth::{Credentials, validate_token_id};
use crate::client::{Client, ClientBuilder};
use crate::error::{Error, Result};
use crate::host::Host;
use crate::tls::{Fingerprint, TlsTrust};

/// One Proxmox cluster as the config file describes it.
///
/// Deserialize only: a zone holds secrets, so it is never written back out (its `Debug` redacts).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ZoneConfig {
    /// API hosts, `host` or `host:port` (default port 8006), tried in order.
    #[serde(default)]
    pub hosts: Vec<String>,
    /// API token id, `USER@REALM!TOKENID`.
    #[serde(default)]
    pub token: Option<String>,
    /// The token secret, inline.
    #[serde(default)]
    pub token_secret: Option<Secret>,
    /// Name of the environment variable holding the token secret.
    #[serde(default)]
    pub token_secret_env: Option<String>,
    /// File holding the token secret (trailing newline ignored).
    #[serde(default)]
    pub token_secret_file: Option<PathBuf>,
    /// User for ticket logins, `USER@REALM`.
    #[serde(default)]
    pub user: Option<String>,
    /// The password, inline.
    #[serde(default)]
    pub password: Option<Secret>,
    /// Name of the environment variable holding the password.
    #[serde(default)]
    pub password_env: Option<String>,
    /// File holding the password (trailing newline ignored).
    #[serde(default)]
    pub password_file: Option<PathBuf>,
    /// PEM file of the CA to trust instead of the web roots (e.g. the cluster's `pve-root-ca.pem`).
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// SHA-256 fingerprint(s) of the hosts' certificates as the GUI shows them: one, or a list.
    #[serde(default)]
    pub fingerprint: Option<Fingerprints>,
    /// Accept any certificate (logged as a warning). Only for tests and labs.
    #[serde(default)]
    pub insecure: bool,
    /// Request timeout in seconds (default 30).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    /// The node whose notes hold flxp's lease of this zone (`[lease]`); default: the
    /// alphabetically first cluster member.
    #[serde(default)]
    pub lease_node: Option<String>,
}

/// `fingerprint = "AA:.."` or `fingerprint = ["AA:..", "BB:.."]` (each node has its own cert).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum Fingerprints {
    /// One fingerprint.
    One(String),
    /// One per node.
    Many(Vec<String>),
}

impl Fingerprints {
    fn items(&self) -> Vec<(String, &str)> {
        match self {
            Self::One(f) => vec![("fingerprint".into(), f.as_str())],
            Self::Many(list) => list
                .iter()
                .enumerate()
                .map(|(i, f)| (format!("fingerprint[{i}]"), f.as_str()))
                .collect(),
        }
    }
}

fn config_err(key: &str, message: impl Into<String>) -> Error {
    Error::Config {
        key: key.to_owned(),
        message: message.into(),
    }
}

/// Where a secret comes from, after checking exactly one source is given.
enum SecretSource<'a> {
    Inline(&'a Secret),
    Env(&'a str),
    File(&'a Path),
}

/// One secret's three mutually exclusive keys: `base`, `base-env` and `base-file`.
struct SecretKeys<'a> {
    base: &'static str,
    inline: Option<&'a Secret>,
    env: Option<&'a String>,
    file: Option<&'a PathBuf>,
}

impl<'a> SecretKeys<'a> {
    fn any(&self) -> bool {
        self.inline.is_some() || self.env.is_some() || self.file.is_some()
    }

    /// The source of the login's own secret, refusing any key of `other`
    /// (the other login's secret) with the `misplaced` message.
    fn only_source(&self, other: &SecretKeys<'_>, misplaced: &str) -> Result<SecretSource<'a>> {
        if other.any() {
            return Err(config_err(other.base, misplaced));
        }
        one_source(self.base, self.inline, self.env, self.file)
    }
}

fn one_source<'a>(
    base: &str,
    inline: Option<&'a Secret>,
    env: Option<&'a String>,
    file: Option<&'a PathBuf>,
) -> Result<SecretSource<'a>> {
    let given = [inline.is_some(), env.is_some(), file.is_some()]
        .iter()
        .filter(|g| **g)
        .count();
    match (given, inline, env, file) {
        (0, ..) => Err(config_err(
            base,
            format!("give one of {base}, {base}-env or {base}-file"),
        )),
        (1, Some(s), _, _) => Ok(SecretSource::Inline(s)),
        (1, _, Some(e), _) if e.trim().is_empty() => {
            Err(config_err(&format!("{base}-env"), "names no variable"))
        }
        (1, _, Some(e), _) => Ok(SecretSource::Env(e)),
        (1, _, _, Some(f)) => Ok(SecretSource::File(f)),
        _ => Err(config_err(
            base,
            format!("give only one of {base}, {base}-env and {base}-file"),
        )),
    }
}

impl SecretSource<'_> {
    fn read(&self, what: &str) -> Result<Secret> {
        let (origin, value) = match self {
            Self::Inline(s) => return Ok((*s).clone()),
            Self::Env(name) => {
                let origin = format!("environment variable {name}");
                let value = std::env::var(name).map_err(|e| Error::Secret {
                    what: what.into(),
                    origin: origin.clone(),
                    message: match e {
                        std::env::VarError::NotPresent => "it is not set".into(),
                        std::env::VarError::NotUnicode(_) => "it is not valid UTF-8".into(),
                    },
                })?;
                (origin, value)
            }
            Self::File(path) => {
                let origin = format!("file {}", path.display());
                let value = std::fs::read_to_string(path).map_err(|e| Error::Secret {
                    what: what.into(),
                    origin: origin.clone(),
                    message: e.to_string(),
                })?;
                (origin, value)
            }
        };
        let value = value.trim_end_matches(['\r', '\n']);
        if value.is_empty() {
            return Err(Error::Secret {
                what: what.into(),
                origin,
                message: "it is empty".into(),
            });
        }
        Ok(Secret::new(value))
    }
}

impl ZoneConfig {
    /// Checks the zone without reading env or file secrets; the error names the wrong key.
    pub fn validate(&self) -> Result<()> {
        self.parsed_hosts()?;
        self.auth_sources()?;
        self.trust_without_files()?;
        if let Some(t) = self.timeout_secs {
            if !(1..=3600).contains(&t) {
                return Err(config_err("timeout-secs", "must be from 1 to 3600 seconds"));
            }
        }
        Ok(())
    }

    fn parsed_hosts(&self) -> Result<Vec<Host>> {
        if self.hosts.is_empty() {
            return Err(config_err("hosts", "list at least one API host"));
        }
        self.hosts
            .iter()
            .enumerate()
            .map(|(i, h)| {
                h.parse::<Host>()
                    .map_err(|e| config_err(&format!("hosts[{i}]"), e.to_string()))
            })
            .collect()
    }

    fn auth_sources(&self) -> Result<(bool, SecretSource<'_>)> {
        let password = SecretKeys {
            base: "password",
            inline: self.password.as_ref(),
            env: self.password_env.as_ref(),
            file: self.password_file.as_ref(),
        };
        let token_secret = SecretKeys {
            base: "token-secret",
            inline: self.token_secret.as_ref(),
            env: self.token_secret_env.as_ref(),
            file: self.token_secret_file.as_ref(),
        };
        match (&self.token, &self.user) {
            (Some(_), Some(_)) => Err(config_err("user", "give either token or user, not both")),
            (None, None) => Err(config_err(
                "token",
                "give token (with token-secret, -env or -file) or user (with password, -env or -file)",
            )),
            (Some(id), None) => {
                validate_token_id(id).map_err(|e| config_err("token", e.to_string()))?;
                let source = token_secret
                    .only_source(&password, "a password belongs to user, not to token")?;
                Ok((true, source))
            }
            (None, Some(user)) => {
                match user.rsplit_once('@') {
                    Some((u, r)) if !u.is_empty() && !r.is_empty() => {}
                    _ => return Err(config_err("user", "expected USER@REALM, e.g. flxp@pve")),
                }
                let source = password.only_source(
                    &token_secret,
                    "a token secret belongs to token, not to user",
                )?;
                Ok((false, source))
            }
        }
    }

    /// The trust mode, CA file not yet read.
    fn trust_without_files(&self) -> Result<Option<TlsTrust>> {
        let modes = [
            self.ca_file.is_some(),
            self.fingerprint.is_some(),
            self.insecure,
        ]
        .iter()
        .filter(|m| **m)
        .count();
        if modes > 1 {
            let key = if self.insecure {
                "insecure"
            } else {
                "fingerprint"
            };
            return Err(config_err(
                key,
                "ca-file, fingerprint and insecure exclude each other: give one",
            ));
        }
        if let Some(f) = &self.fingerprint {
            let items = f.items();
            if items.is_empty() {
                return Err(config_err("fingerprint", "the list is empty"));
            }
            let pins = items
                .into_iter()
                .map(|(key, text)| {
                    text.parse::<Fingerprint>()
                        .map_err(|e| config_err(&key, e.to_string()))
                })
                .collect::<Result<Vec<_>>>()?;
            return Ok(Some(TlsTrust::Pinned(pins)));
        }
        if self.insecure {
            return Ok(Some(TlsTrust::Insecure));
        }
        Ok(None)
    }

    /// Credentials with env and file secrets read now; errors name the variable or file only.
    pub fn credentials(&self) -> Result<Credentials> {
        let (is_token, source) = self.auth_sources()?;
        Ok(if is_token {
            Credentials::Token {
                id: self.token.clone().unwrap_or_default(),
                secret: source.read("token secret")?,
            }
        } else {
            Credentials::Password {
                username: self.user.clone().unwrap_or_default(),
                password: source.read("password")?,
            }
        })
    }

    /// The TLS trust, CA file read now.
    pub fn trust(&self) -> Result<TlsTrust> {
        match (self.trust_without_files()?, &self.ca_file) {
            (Some(t), _) => Ok(t),
            (None, Some(path)) => TlsTrust::from_ca_file(path),
            (None, None) => Ok(TlsTrust::WebRoots),
        }
    }

    /// A client builder with everything the zone says; tune it further before `build()`.
    pub fn client_builder(&self) -> Result<ClientBuilder> {
        self.validate()?;
        let mut builder =
            ClientBuilder::new(self.parsed_hosts()?, self.credentials()?).trust(self.trust()?);
        if let Some(t) = self.timeout_secs {
            builder = builder.timeout(Duration::from_secs(t));
        }
        Ok(builder)
    }
}

impl Client {
    /// Builds the client of a zone: validates it, reads env/file secrets and the CA file.
    pub fn from_zone(zone: &ZoneConfig) -> Result<Client> {
        zone.client_builder()?.build()
    }
}

/// Reads the `[zones.*]` tables of a TOML config (other top-level tables are ignored) and
/// validates each; errors carry TOML's line and column, or the zone and key.
pub fn zones_from_toml(text: &str) -> Result<BTreeMap<String, ZoneConfig>> {
    #[derive(Deserialize)]
    struct File {
        #[serde(default)]
        zones: BTreeMap<String, ZoneConfig>,
    }
    let file: File = toml::from_str(text).map_err(|e| config_err("zones", e.to_string()))?;
    for (name, zone) in &file.zones {
        zone.validate().map_err(|e| match e {
            Error::Config { key, message } => config_err(&format!("zones.{name}.{key}"), message),
            other => other,
        })?;
    }
    Ok(file.zones)
}

#[cfg(test)]
mod tests {
    // Tests may panic on malformed fixtures: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use super::*;

    const PIN: &str = "9A:1F:3C:00:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:FF";

    fn zone(toml_text: &str) -> Result<ZoneConfig> {
        let z = zones_from_toml(&format!("[zones.z]\n{toml_text}"))?;
        Ok(z["z"].clone())
    }

    fn key_of(e: Error) -> String {
        match e {
            Error::Config { key, .. } => key,
            other => panic!("not a config error: {other}"),
        }
    }

    #[test]
    fn a_token_zone_reads_and_builds_its_credentials() {
        let z = zone(&format!(
            "hosts = [\"pve1\", \"pve2:8443\"]\ntoken = \"root@pam!flxp\"\ntoken-secret = \"abc\"\nfingerprint = \"{PIN}\"\ntimeout-secs = 10"
        ))
        .unwrap();
        assert_eq!(z.hosts, ["pve1", "pve2:8443"]);
        let Credentials::Token { id, secret } = z.credentials().unwrap() else {
            panic!()
        };
        assert_eq!((id.as_str(), secret.expose()), ("root@pam!flxp", "abc"));
        assert!(matches!(z.trust().unwrap(), TlsTrust::Pinned(p) if p.len() == 1));
        assert!(!format!("{z:?}").contains("abc"));
        let c = Client::from_zone(&z).unwrap();
        assert_eq!(c.hosts()[1].port, 8443);
    }

    #[test]
    fn unknown_keys_are_refused_with_their_position() {
        let e = zone(
            "hosts = [\"pve1\"]\ntoken = \"root@pam!flxp\"\ntoken-secret = \"x\"\nverify = false",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("unknown field `verify`"), "{e}");
        assert!(e.contains("line 5"), "{e}");
    }

    #[test]
    fn every_mistake_names_its_key() {
        let base = "hosts = [\"pve1\"]\n";
        for (body, key) in [
            (
                "token = \"root@pam!flxp\"\ntoken-secret = \"x\"",
                "zones.z.hosts",
            ),
            (
                "hosts = [\"pve1:99999\"]\ntoken = \"root@pam!flxp\"\ntoken-secret = \"x\"",
                "zones.z.hosts[0]",
            ),
            (base, "zones.z.token"),
            (
                &format!("{base}token = \"root@pam\"\ntoken-secret = \"x\""),
                "zones.z.token",
            ),
            (
                &format!("{base}token = \"root@pam!flxp\""),
                "zones.z.token-secret",
            ),
            (
                &format!(
                    "{base}token = \"root@pam!flxp\"\ntoken-secret = \"x\"\ntoken-secret-env = \"X\""
                ),
                "zones.z.token-secret",
            ),
            (
                &format!("{base}token = \"root@pam!flxp\"\ntoken-secret-env = \" \""),
                "zones.z.token-secret-env",
            ),
            (
                &format!("{base}token = \"root@pam!flxp\"\ntoken-secret = \"x\"\npassword = \"y\""),
                "zones.z.password",
            ),
            (
                &format!("{base}user = \"flxp\"\npassword = \"y\""),
                "zones.z.user",
            ),
            (
                &format!("{base}user = \"flxp@pve\"\ntoken = \"root@pam!flxp\""),
                "zones.z.user",
            ),
            (
                &format!("{base}user = \"flxp@pve\"\npassword = \"y\"\nfingerprint = \"AA:BB\""),
                "zones.z.fingerprint",
            ),
            (
                &format!(
                    "{base}user = \"flxp@pve\"\npassword = \"y\"\nfingerprint = [\"{PIN}\", \"zz\"]"
                ),
                "zones.z.fingerprint[1]",
            ),
            (
                &format!(
                    "{base}user = \"flxp@pve\"\npassword = \"y\"\nfingerprint = \"{PIN}\"\ninsecure = true"
                ),
                "zones.z.insecure",
            ),
            (
                &format!("{base}user = \"flxp@pve\"\npassword = \"y\"\ntimeout-secs = 0"),
                "zones.z.timeout-secs",
            ),
        ] {
            let e = zone(body).unwrap_err();
            assert_eq!(key_of(e), key, "{body}");
        }
    }

    #[test]
    fn env_and_file_secrets_are_read_at_build_time_and_errors_never_show_them() {
        let dir = std::env::temp_dir().join(format!("flxp-pve-zone-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("secret");
        std::fs::write(&file, "file-secret-value\n").unwrap();
        let z = zone(&format!(
            "hosts = [\"pve1\"]\nuser = \"flxp@pve\"\npassword-file = \"{}\"",
            file.display()
        ))
        .unwrap();
        let Credentials::Password { password, .. } = z.credentials().unwrap() else {
            panic!()
        };
        assert_eq!(password.expose(), "file-secret-value");

        let missing = zone("hosts = [\"pve1\"]\ntoken = \"root@pam!flxp\"\ntoken-secret-env = \"FLXP_TEST_SURELY_UNSET_VAR\"")
            .unwrap();
        let e = missing.credentials().unwrap_err().to_string();
        assert_eq!(
            e,
            "cannot read the token secret from environment variable FLXP_TEST_SURELY_UNSET_VAR: it is not set"
        );
        std::fs::write(&file, "\n").unwrap();
        let e = z.credentials().unwrap_err().to_string();
        assert!(e.ends_with("it is empty"), "{e}");
        assert!(e.contains(&file.display().to_string()), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn other_top_level_tables_are_left_to_the_binary() {
        let zones = zones_from_toml(
            "[daemon]\ninterval = 60\n[zones.a]\nhosts = [\"pve1\"]\ntoken = \"root@pam!flxp\"\ntoken-secret = \"x\"\ninsecure = true\n",
        )
        .unwrap();
        assert!(zones["a"].insecure);
    }
}
