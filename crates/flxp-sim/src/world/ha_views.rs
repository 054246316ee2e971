//! HA status views: `GET /cluster/ha/status/current`, `manager_status`, and one resource's config.

use flxp_core::snapshot::raw::HaResource;
use flxp_pve::types::ha::{
    HaQuorum, LrmStatus, ManagerStatus, ManagerStatusResponse, NodeRequest,
    ServiceStatus as WireServiceStatus,
};
use serde_json::{Value, json};

use super::World;
use crate::clock::perl_localtime;

impl World {
    /// Whether more than half of all nodes are online (every node has one vote, as corosync
    /// counts them by default).
    pub fn quorate(&self) -> bool {
        self.nodes.values().filter(|n| n.online).count() * 2 > self.nodes.len()
    }

    /// `GET /cluster/ha/status/current`.
    pub fn ha_status_current(&self) -> Vec<Value> {
        let now = self.now;
        let master = self.ha_master();
        let local = master.clone().unwrap_or_default();
        let quorate = self.quorate();
        let mut out = vec![json!({
            "id": "quorum", "type": "quorum", "node": local,
            "status": if quorate { "OK" } else { "No quorum on node" }, "quorate": u8::from(quorate),
        })];
        if !self.ha_in_use() {
            return out;
        }
        if let Some(m) = &master {
            out.push(json!({
                "id": "master", "type": "master", "node": m, "timestamp": now.floor() as i64,
                "status": format!("{m} (active, {})", perl_localtime(now)),
            }));
        }
        for n in self.nodes.values() {
            let active = self.ha.services.values().any(|s| s.node == n.name);
            let (text, ts) = if !n.online {
                let since = n.offline_since.unwrap_or(now);
                ("old timestamp - dead?".to_string(), since)
            } else if n.ha_maintenance {
                ("maintenance mode".to_string(), now)
            } else if active {
                ("active".to_string(), now)
            } else {
                ("idle".to_string(), now)
            };
            out.push(json!({
                "id": format!("lrm:{}", n.name), "type": "lrm", "node": n.name,
                "status": format!("{} ({text}, {})", n.name, perl_localtime(ts)),
                "timestamp": ts.floor() as i64,
            }));
        }
        for (sid, s) in &self.ha.services {
            let Some(conf) = self.ha.resources.get(sid) else {
                continue;
            };
            let mut e = json!({
                "id": format!("service:{sid}"), "type": "service", "sid": sid, "node": s.node,
                "crm_state": s.state, "state": s.state, "request_state": conf.state,
                "status": format!("{sid} ({}, {})", s.node, s.state),
                "max_restart": conf.max_restart, "max_relocate": conf.max_relocate,
                "failback": u8::from(conf.failback),
            });
            if let Some(c) = &conf.comment {
                e["comment"] = json!(c);
            }
            out.push(e);
        }
        out
    }

    /// `GET /cluster/ha/status/manager_status`.
    pub fn ha_manager_status(&self) -> ManagerStatusResponse {
        let now = self.now.floor() as i64;
        let master = self.ha_master().unwrap_or_default();
        let quorum = Some(HaQuorum {
            node: Some(master.clone()),
            quorate: Some(self.quorate()),
        });
        if !self.ha_in_use() {
            return ManagerStatusResponse {
                quorum,
                ..ManagerStatusResponse::default()
            };
        }
        let manager_status = ManagerStatus {
            master_node: Some(master),
            timestamp: Some(now),
            node_status: self
                .nodes
                .keys()
                .map(|n| (n.clone(), self.ha_node_state(n).to_string()))
                .collect(),
            node_request: self
                .nodes
                .values()
                .filter(|n| n.ha_maintenance)
                .map(|n| {
                    (
                        n.name.clone(),
                        NodeRequest {
                            maintenance: Some(true),
                        },
                    )
                })
                .collect(),
            service_status: self
                .ha
                .services
                .iter()
                .map(|(sid, s)| {
                    (
                        sid.clone(),
                        WireServiceStatus {
                            node: Some(s.node.clone()),
                            state: Some(s.state.clone()),
                            target: s.target.clone(),
                            uid: Some(format!("{:x}", crate::world::uid_of(sid))),
                            maintenance_node: s.maintenance_node.clone(),
                        },
                    )
                })
                .collect(),
        };
        let lrm_status = self
            .nodes
            .values()
            .map(|n| {
                let mode = if n.ha_maintenance {
                    "maintenance"
                } else {
                    "active"
                };
                let busy = self.ha.services.values().any(|s| s.node == n.name);
                let ts = if n.online {
                    now
                } else {
                    n.offline_since.unwrap_or(self.now).floor() as i64
                };
                (
                    n.name.clone(),
                    LrmStatus {
                        mode: Some(mode.into()),
                        state: Some(
                            if busy {
                                "active"
                            } else {
                                "wait_for_agent_lock"
                            }
                            .into(),
                        ),
                        timestamp: Some(ts),
                        results: Some(json!({})),
                    },
                )
            })
            .collect();
        ManagerStatusResponse {
            manager_status,
            quorum,
            lrm_status,
        }
    }

    /// Digest of the resources config.
    pub fn ha_resources_digest(&self) -> String {
        let text = format!("{:?}", self.ha.resources);
        super::hex(
            ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, text.as_bytes()).as_ref(),
        )
    }

    /// One resource's config as the API shows it.
    // The struct update keeps this compiling when Contract 1 grows a field.
    #[allow(clippy::needless_update)]
    pub fn ha_resource(&self, sid: &str) -> Option<HaResource> {
        let conf = self.ha.resources.get(sid)?;
        Some(HaResource {
            sid: Some(sid.to_string()),
            kind: Some(if sid.starts_with("ct:") { "ct" } else { "vm" }.into()),
            state: Some(conf.state.clone()),
            failback: Some(conf.failback),
            max_restart: Some(conf.max_restart),
            max_relocate: Some(conf.max_relocate),
            group: conf.group.clone(),
            comment: conf.comment.clone(),
            digest: Some(self.ha_resources_digest()),
            ..HaResource::default()
        })
    }
}
