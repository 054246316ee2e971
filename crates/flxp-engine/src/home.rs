//! Where evacuated guests come from, kept in Proxmox so that any flxp, after any restart, can take
//! them back once the node's maintenance ends.
//!
//! Before an evacuation moves a guest, the guests on each node it empties are recorded in that
//! node's notes as one HTML comment line (invisible in the rendered notes, like the lease and the
//! power mark): `<!-- flxp-home vmids=101,102 -->`. A later evacuation of the same node adds to
//! the line. Once the node is out of maintenance, [`Executor::plan_return`] plans the recorded
//! guests back ([`flxp_core::return_home`]), and [`Executor::settle_homes`] keeps in the line only
//! the guests still away, removing it when all are home (or gone).

use std::collections::BTreeSet;

use flxp_core::balance::{EvacuateOptions, Plan};

use crate::execute::{Executor, error_chain};
use crate::planning::Goal;

/// The start of a home line.
const PREFIX: &str = "<!-- flxp-home ";

/// Why guests' homes could not be recorded, read or settled.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HomeError {
    /// The cluster could not be read.
    #[error("cannot read the cluster for the guests of node {node}: {reason}")]
    Unreadable {
        /// The node.
        node: String,
        /// The read error, with its causes.
        reason: String,
    },
    /// The node is not in the cluster.
    #[error("node {node:?} is not in the cluster")]
    UnknownNode {
        /// The name given.
        node: String,
    },
    /// The node's notes could not be read or written.
    #[error("cannot update the home mark in the notes of node {node}")]
    Notes {
        /// The node.
        node: String,
        /// Proxmox's answer.
        #[source]
        source: flxp_pve::Error,
    },
}

/// The vmids of a home line; `None` for any other line.
fn parse(line: &str) -> Option<BTreeSet<u32>> {
    let body = line.trim().strip_prefix(PREFIX)?.strip_suffix("-->")?;
    let list = body
        .split_whitespace()
        .find_map(|w| w.strip_prefix("vmids="))?;
    Some(list.split(',').filter_map(|v| v.parse().ok()).collect())
}

/// Every guest the notes record as at home on their node.
pub fn read(notes: &str) -> BTreeSet<u32> {
    notes.lines().filter_map(parse).flatten().collect()
}

/// The notes with the home line holding `vmids` (none: no line); `None` when nothing changes.
pub fn edited(notes: &str, vmids: &BTreeSet<u32>) -> Option<String> {
    let line = (!vmids.is_empty()).then(|| {
        let list: Vec<String> = vmids.iter().map(u32::to_string).collect();
        format!("{PREFIX}vmids={} -->", list.join(","))
    });
    crate::notes_edit::with_line(notes, |l| parse(l).is_some(), line.as_deref())
}

impl Executor {
    /// Records the guests now on `node` as at home there (added to any earlier record), before
    /// an evacuation moves one; the guests recorded.
    pub async fn record_homes(&self, node: &str) -> Result<BTreeSet<u32>, HomeError> {
        let model = self.read().await.map_err(|e| HomeError::Unreadable {
            node: node.to_owned(),
            reason: error_chain(&e),
        })?;
        let c = &model.cluster;
        let idx = c
            .node_idx_loose(node)
            .ok_or_else(|| HomeError::UnknownNode {
                node: node.to_owned(),
            })?;
        let name = c.node(idx).name.clone();
        let here: BTreeSet<u32> = c
            .guest_indexes()
            .filter(|&g| model.state.location(g) == idx && !c.guest(g).template)
            .map(|g| c.guest(g).vmid)
            .collect();
        crate::notes_edit::edit(self.api(), &name, |text| {
            let mut all = read(text);
            all.extend(&here);
            edited(text, &all)
        })
        .await
        .map_err(|source| HomeError::Notes {
            node: name.clone(),
            source,
        })?;
        tracing::info!(zone = self.zone(), node = %name, guests = here.len(), "homes recorded");
        Ok(here)
    }

    /// The guests recorded as at home on `node` (its notes read now).
    pub async fn homes(&self, node: &str) -> Result<BTreeSet<u32>, HomeError> {
        let config = self
            .api()
            .node_config(node)
            .await
            .map_err(|source| HomeError::Notes {
                node: node.to_owned(),
                source,
            })?;
        Ok(read(config.description.as_deref().unwrap_or_default()))
    }

    /// Plans the guests recorded on `node` back home, and the goal that carries the plan out
    /// (replans take the same guests back).
    pub async fn plan_return(
        &self,
        node: &str,
        options: &EvacuateOptions,
    ) -> Result<(Goal, Plan), crate::Error> {
        let vmids = self.homes(node).await.map_err(|e| crate::Error::Home {
            reason: error_chain(&e),
        })?;
        let goal = Goal::ReturnHome {
            node: node.to_owned(),
            vmids: vmids.into_iter().collect(),
            options: options.clone(),
        };
        let plan = self.plan(&goal).await?;
        Ok((goal, plan))
    }

    /// Keeps in `node`'s home line only the guests that still exist and are away from it,
    /// removing the line when none is; those still away.
    pub async fn settle_homes(&self, node: &str) -> Result<BTreeSet<u32>, HomeError> {
        let model = self.read().await.map_err(|e| HomeError::Unreadable {
            node: node.to_owned(),
            reason: error_chain(&e),
        })?;
        let c = &model.cluster;
        let idx = c.node_idx(node);
        let away = |v: u32| {
            c.guest_idx(v)
                .is_some_and(|g| Some(model.state.location(g)) != idx)
        };
        let left = std::sync::Mutex::new(BTreeSet::new());
        crate::notes_edit::edit(self.api(), node, |text| {
            let still: BTreeSet<u32> = read(text).into_iter().filter(|&v| away(v)).collect();
            let change = edited(text, &still);
            if let Ok(mut l) = left.lock() {
                *l = still;
            }
            change
        })
        .await
        .map_err(|source| HomeError::Notes {
            node: node.to_owned(),
            source,
        })?;
        Ok(left.into_inner().unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_home_line_is_read_merged_and_removed() {
        let notes = "Rack 4 flxp.label.ssd";
        let set: BTreeSet<u32> = [102, 101].into();
        let with = edited(notes, &set).unwrap();
        assert_eq!(
            with,
            "Rack 4 flxp.label.ssd\n<!-- flxp-home vmids=101,102 -->"
        );
        assert_eq!(read(&with), set);
        assert_eq!(edited(&with, &set), None);
        assert_eq!(edited(&with, &BTreeSet::new()).as_deref(), Some(notes));
        assert_eq!(
            read("<!-- flxp-home vmids= -->\n<!-- flxp-power node=a -->"),
            BTreeSet::new()
        );
    }
}
