//! Stale creation markers: VMs still tagged `flxp.creating` long after their creation began,
//! because the flxp creating them was killed (or lost Proxmox) before it could finish or clean up.
//!
//! The age comes from the VM itself: the creation writes `flxp.creating-since.<epoch>` beside the
//! marker (one config update), so any flxp, on any host, judges it without state of its own.
//! Proxmox keeps no creation time a client can rely on (the clone task in `/cluster/tasks` is
//! listed under the *template's* id and its history is trimmed). A marker older than
//! [`StaleOptions::after`] that no creation of this process has in flight is stale: creations of
//! other replicas finish well within that time (the default is an hour; a clone's task timeout
//! is 15 minutes).
//!
//! What is done with a stale marker ([`StaleAction::Remove`]):
//! - a stopped VM is half-made (killed before or during its start): it is deleted with purge;
//! - a running VM was started, so it is complete (its marker's removal failed, or flxp was killed
//!   right after the start): only the marker tags come off, the VM is kept;
//! - a VM with a Proxmox lock (a clone, a migration) is left for a later round;
//! - a marker without its `creating-since` tag (an older flxp wrote it) has no age: warned about
//!   only, never acted on.
//!
//! With [`StaleAction::Warn`] each stale marker is only logged. Either way, every marker found
//! is in [`StaleMarker`] and logged.

use std::time::Duration;

use flxp_core::cluster::{Cluster, GuestKind as CoreKind};
use flxp_pve::types::{DeleteParams, GuestKind};
use flxp_pve::{Pve, TaskWait};
use serde::{Deserialize, Serialize};

use crate::create_vm::{creating_since, is_creating_tag, remove_marker};

/// What to do with a stale marker (`[create-vm] stale-action`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StaleAction {
    /// Delete a stopped marked VM; take the marker off a running one.
    Remove,
    /// Only log it.
    Warn,
}

/// When a marker is stale and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleOptions {
    /// A marker older than this with no creation of this process in flight is stale.
    pub after: Duration,
    /// What to do with it.
    pub action: StaleAction,
}

impl Default for StaleOptions {
    fn default() -> Self {
        Self {
            after: Duration::from_secs(3600),
            action: StaleAction::Remove,
        }
    }
}

/// What was found about one stale marker, and what was done.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StaleMarker {
    /// The VM.
    pub vmid: u32,
    /// Its node.
    pub node: String,
    /// Whether it was running.
    pub running: bool,
    /// Seconds since it was marked, when the marker says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub age_secs: Option<i64>,
    /// What was done: `deleted`, `unmarked`, `warned`, `skipped: <why>` or `failed: <why>`.
    pub outcome: String,
}

/// A marked VM as the snapshot shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marked {
    /// The VM.
    pub vmid: u32,
    /// Its node.
    pub node: String,
    /// Whether it runs.
    pub running: bool,
    /// When it was marked (epoch seconds), when the marker says.
    pub since: Option<i64>,
    /// Its Proxmox lock, if any.
    pub lock: Option<String>,
}

/// Every VM of `cluster` that carries `flxp.creating` and whose creation is not in `in_flight`.
pub fn marked(cluster: &Cluster, in_flight: &[u32]) -> Vec<Marked> {
    cluster
        .guests()
        .iter()
        .filter(|g| g.kind == CoreKind::Qemu && !g.template && !in_flight.contains(&g.vmid))
        .filter(|g| g.tags.iter().any(|t| is_creating_tag(t)))
        .map(|g| Marked {
            vmid: g.vmid,
            node: cluster.node(g.node).name.clone(),
            running: g.running,
            since: g.tags.iter().find_map(|t| creating_since(t)),
            lock: g.lock.clone(),
        })
        .collect()
}

/// Whether [`clean`] would write anything at `now` (delete a half-made VM, take a marker off a
/// running one): a stale marker with an age, on an unlocked VM, with [`StaleAction::Remove`].
/// The daemon takes the zone's lease only for rounds that write.
pub fn writes(cluster: &Cluster, in_flight: &[u32], now: i64, options: &StaleOptions) -> bool {
    let after = i64::try_from(options.after.as_secs()).unwrap_or(i64::MAX);
    options.action == StaleAction::Remove
        && marked(cluster, in_flight)
            .iter()
            .any(|m| m.lock.is_none() && m.since.is_some_and(|s| now.saturating_sub(s) >= after))
}

/// Finds the stale markers of `cluster` at `now` (epoch seconds) and acts on them as `options`
/// say; see the module docs. Never fails: each marker's outcome says what happened.
pub async fn clean(
    api: &Pve,
    cluster: &Cluster,
    in_flight: &[u32],
    now: i64,
    options: &StaleOptions,
    wait: &TaskWait,
) -> Vec<StaleMarker> {
    let after = i64::try_from(options.after.as_secs()).unwrap_or(i64::MAX);
    let mut out = Vec::new();
    for m in marked(cluster, in_flight) {
        let age = m.since.map(|s| now.saturating_sub(s));
        let Some(age_secs) = age else {
            tracing::warn!(vmid = m.vmid, node = %m.node, "VM carries flxp.creating without its creating-since tag: its age is unknown, finish or remove it by hand");
            out.push(StaleMarker {
                vmid: m.vmid,
                node: m.node,
                running: m.running,
                age_secs: None,
                outcome: "warned".into(),
            });
            continue;
        };
        if age_secs < after {
            continue;
        }
        let outcome = match (options.action, &m.lock) {
            (StaleAction::Warn, _) => {
                tracing::warn!(vmid = m.vmid, node = %m.node, age_secs, running = m.running, "stale flxp.creating marker (stale-action = warn: left alone)");
                "warned".to_owned()
            }
            (StaleAction::Remove, Some(lock)) => {
                tracing::warn!(vmid = m.vmid, node = %m.node, age_secs, lock = %lock, "stale flxp.creating marker on a locked VM: left for a later round");
                format!("skipped: locked ({lock})")
            }
            (StaleAction::Remove, None) if m.running => {
                match remove_marker(api, &m.node, m.vmid).await {
                    Ok(()) => {
                        tracing::info!(vmid = m.vmid, node = %m.node, age_secs, "stale flxp.creating marker removed from a running VM (kept: it was started)");
                        "unmarked".to_owned()
                    }
                    Err(e) => {
                        tracing::error!(vmid = m.vmid, node = %m.node, error = %e, "removing a stale flxp.creating marker failed");
                        format!("failed: {e}")
                    }
                }
            }
            (StaleAction::Remove, None) => match delete(api, &m.node, m.vmid, wait).await {
                Ok(()) => {
                    tracing::info!(vmid = m.vmid, node = %m.node, age_secs, "half-made VM with a stale flxp.creating marker deleted");
                    "deleted".to_owned()
                }
                Err(e) => {
                    tracing::error!(vmid = m.vmid, node = %m.node, error = %e, "deleting a half-made VM with a stale flxp.creating marker failed");
                    format!("failed: {e}")
                }
            },
        };
        out.push(StaleMarker {
            vmid: m.vmid,
            node: m.node,
            running: m.running,
            age_secs: Some(age_secs),
            outcome,
        });
    }
    out
}

/// Deletes a stopped VM with purge, after checking it is still stopped and still marked: the
/// snapshot may be old, and a VM someone started or finished meanwhile is not half-made.
async fn delete(api: &Pve, node: &str, vmid: u32, wait: &TaskWait) -> flxp_pve::Result<()> {
    let cfg = api.guest_config(node, GuestKind::Qemu, vmid).await?;
    let still_marked = cfg.get("tags").is_some_and(|t| {
        flxp_core::cluster::split_tags(&t)
            .iter()
            .any(|t| is_creating_tag(t))
    });
    let status = api.guest_status(node, GuestKind::Qemu, vmid).await?;
    if !still_marked || status.entry.status.as_deref() != Some("stopped") {
        return Err(flxp_pve::Error::BadResponse {
            endpoint: format!("/nodes/{node}/qemu/{vmid}"),
            message: "changed since the snapshot (started or unmarked): not deleted".into(),
        });
    }
    let params = DeleteParams {
        purge: Some(true),
        destroy_unreferenced_disks: Some(true),
    };
    let upid = api
        .delete_guest(node, GuestKind::Qemu, vmid, &params)
        .await?;
    api.wait_task(&upid, wait).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    // Tests may panic on malformed fixtures: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use flxp_core::Overrides;

    fn cluster() -> Cluster {
        let text = r#"[{"id":"node/a","type":"node","node":"a","status":"online","maxmem":17179869184,"mem":0,"maxcpu":8},
            {"id":"qemu/200","type":"qemu","vmid":200,"node":"a","status":"stopped","maxmem":1073741824,"tags":"flxp.creating;flxp.creating-since.1000;web"},
            {"id":"qemu/201","type":"qemu","vmid":201,"node":"a","status":"running","maxmem":1073741824,"tags":"FLXP.Creating"},
            {"id":"qemu/202","type":"qemu","vmid":202,"node":"a","status":"running","maxmem":1073741824,"tags":"web"}]"#;
        Cluster::from_json(text, &Overrides::default()).unwrap()
    }

    #[test]
    fn marked_vms_are_found_unless_their_creation_is_in_flight_here() {
        let c = cluster();
        let found = marked(&c, &[]);
        assert_eq!(
            found,
            [
                Marked {
                    vmid: 200,
                    node: "a".into(),
                    running: false,
                    since: Some(1000),
                    lock: None,
                },
                Marked {
                    vmid: 201,
                    node: "a".into(),
                    running: true,
                    since: None,
                    lock: None,
                },
            ]
        );
        let found = marked(&c, &[200]);
        assert_eq!(found.iter().map(|m| m.vmid).collect::<Vec<_>>(), [201]);
    }
}
