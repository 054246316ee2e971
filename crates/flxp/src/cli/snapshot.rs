//! `flxp snapshot --zone Z [--config F]`: writes the zone's cluster snapshot (Contract 1) to
//! stdout as pretty JSON, so any plan can be replayed later with `--from-file`.
//!
//! Until the binary's own config loader exists, this reads the `[zones.<name>]` tables itself
//! (`flxp_pve::zone::zones_from_toml`); every other table of the file is left alone.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;

use flxp_pve::{Client, ZoneConfig};

use super::UsageError;

/// Where the config file is when neither `--config` nor `FLXP_CONFIG` says.
const DEFAULT_CONFIG: &str = "/etc/flxp/flxp.toml";

/// Arguments of `flxp snapshot`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Zone (a Proxmox cluster) of the config file to read.
    #[arg(long, value_name = "Z")]
    pub zone: String,
    /// Config file (else FLXP_CONFIG, else /etc/flxp/flxp.toml).
    #[arg(long, value_name = "F", env = "FLXP_CONFIG")]
    pub config: Option<PathBuf>,
}

/// Runs `flxp snapshot`: one snapshot of the zone, printed as pretty JSON.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let path = args.config.unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG));
    let zone = load_zone(&path, &args.zone)?;
    let client = Client::from_zone(&zone)
        .with_context(|| format!("zone {} of {}", args.zone, path.display()))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or_default();
    let snapshot = runtime
        .block_on(flxp_engine::collect_snapshot(&client, now))
        .with_context(|| format!("zone {}", args.zone))?;
    println!("{}", snapshot.to_json_pretty());
    Ok(ExitCode::SUCCESS)
}

/// Reads the config file and picks one zone; an unknown zone is a usage error listing the known.
fn load_zone(path: &Path, name: &str) -> anyhow::Result<ZoneConfig> {
    tracing::debug!(config = %path.display(), "reading the config file");
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the config file {}", path.display()))?;
    let mut zones = flxp_pve::zone::zones_from_toml(&text)
        .with_context(|| format!("config file {}", path.display()))?;
    match zones.remove(name) {
        Some(zone) => Ok(zone),
        None if zones.is_empty() => Err(UsageError(format!(
            "zone {name:?} is not in {}: it defines no [zones.<name>] table",
            path.display()
        ))
        .into()),
        None => Err(UsageError(format!(
            "zone {name:?} is not in {}: known zones are {}",
            path.display(),
            zones.keys().cloned().collect::<Vec<_>>().join(", ")
        ))
        .into()),
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic on malformed fixtures: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn write(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("flxp.toml");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    const CONFIG: &str = r#"
[zones.eu-central]
hosts = ["pve1.example.com"]
token = "flxp@pve!scheduler"
token-secret-env = "FLXP_EU_TOKEN"

[zones.lab]
hosts = ["10.0.0.2:8006"]
user = "root@pam"
password-file = "/etc/flxp/lab.pw"
insecure = true
"#;

    #[test]
    fn a_known_zone_is_loaded_without_reading_its_secrets() {
        let (_dir, path) = write(CONFIG);
        let zone = load_zone(&path, "lab").unwrap();
        assert_eq!(zone.hosts, ["10.0.0.2:8006"]);
        assert!(zone.insecure);
    }

    #[test]
    fn an_unknown_zone_is_a_usage_error_naming_the_known_ones() {
        let (_dir, path) = write(CONFIG);
        let e = load_zone(&path, "us-west").unwrap_err();
        assert!(e.downcast_ref::<UsageError>().is_some());
        assert_eq!(
            e.to_string(),
            format!(
                "zone \"us-west\" is not in {}: known zones are eu-central, lab",
                path.display()
            )
        );
        let (_dir, empty) = write("[daemon]\ninterval-secs = 60\n");
        let e = load_zone(&empty, "lab").unwrap_err();
        assert!(
            e.to_string()
                .ends_with("it defines no [zones.<name>] table"),
            "{e}"
        );
    }

    #[test]
    fn config_mistakes_name_the_file_and_the_key() {
        let (_dir, path) =
            write("[zones.lab]\nhosts = []\ntoken = \"a@pam!b\"\ntoken-secret = \"x\"\n");
        let e = format!("{:#}", load_zone(&path, "lab").unwrap_err());
        assert_eq!(
            e,
            format!(
                "config file {}: zone config: zones.lab.hosts: list at least one API host",
                path.display()
            )
        );
        let missing = PathBuf::from("/nonexistent/flxp.toml");
        let e = format!("{:#}", load_zone(&missing, "lab").unwrap_err());
        assert!(
            e.starts_with("cannot read the config file /nonexistent/flxp.toml"),
            "{e}"
        );
    }
}
