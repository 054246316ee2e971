//! Reading the cluster a command works on: a snapshot file (or stdin), or a live zone.

use std::io::Read;
use std::path::Path;

use anyhow::{Context, Result, bail};
use flxp_core::{Cluster, Overrides, Rules, Snapshot, State};

use super::{SourceArgs, UsageError};

/// A cluster ready for decisions: the model, its rules and its state.
pub struct Loaded {
    /// The typed cluster.
    pub cluster: Cluster,
    /// Its compiled rules.
    pub rules: Rules,
    /// Its state as reported.
    pub state: State,
}

impl Loaded {
    /// Builds model, rules and state from a snapshot.
    pub fn from_snapshot(snapshot: &Snapshot, overrides: &Overrides) -> Result<Self> {
        let cluster = Cluster::from_snapshot(snapshot, overrides)?;
        let rules = Rules::compile(&cluster);
        let state = State::new(&cluster);
        Ok(Self {
            cluster,
            rules,
            state,
        })
    }
}

/// Reads a snapshot file; `-` is stdin. Errors name the file.
pub fn read_snapshot_file(path: &Path) -> Result<Snapshot> {
    let text = if path.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("cannot read the snapshot from stdin")?;
        s
    } else {
        std::fs::read_to_string(path)
            .with_context(|| format!("cannot read snapshot file {}", path.display()))?
    };
    Snapshot::from_json(&text).with_context(|| format!("in {}", path.display()))
}

/// Loads the cluster the source arguments name.
pub fn load(source: &SourceArgs) -> Result<Loaded> {
    match (&source.from_file, &source.zone) {
        (Some(path), _) => {
            let snap = read_snapshot_file(path)?;
            Loaded::from_snapshot(&snap, &Overrides::default())
        }
        (None, Some(zone)) => {
            bail!("reading zone {zone:?} live is not available in this build yet; use --from-file")
        }
        (None, None) => Err(UsageError(
            "name the cluster: --from-file F (a snapshot) or --zone Z (from the config file)"
                .into(),
        )
        .into()),
    }
}
