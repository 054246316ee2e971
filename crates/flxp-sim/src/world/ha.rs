//! High availability: HA resources and the service states the HA manager keeps, and its
//! reactions: queued migrations and power requests, maintenance evacuation and return, fencing
//! and recovery of a dead node's services. Rules live in `ha_rules.rs`, views in `ha_views.rs`.

use std::collections::BTreeMap;

use flxp_core::snapshot::raw::HaRule;

use super::migrate::MigrateRequest;
use super::{Action, Guest, PowerOp, World};

/// An HA resource's configuration (`/cluster/ha/resources`).
#[derive(Debug, Clone, PartialEq)]
pub struct HaResourceConf {
    /// Requested state: `started`, `stopped`, `enabled`, `disabled`, `ignored`.
    pub state: String,
    /// Maximal restarts on one node.
    pub max_restart: u64,
    /// Maximal relocations.
    pub max_relocate: u64,
    /// Whether HA moves it back to its highest-priority node class (`ha_failback.rs`).
    pub failback: bool,
    /// Legacy group.
    pub group: Option<String>,
    /// Comment.
    pub comment: Option<String>,
}

/// What the HA manager has been asked to do with a service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HaRequest {
    /// Live-migrate to a node.
    Migrate(String),
    /// Stop, move and start on a node.
    Relocate(String),
    /// Start it.
    Start,
    /// Stop it.
    Stop,
}

/// The HA manager's view of one service.
#[derive(Debug, Clone, PartialEq)]
pub struct ServiceStatus {
    /// Node it is on.
    pub node: String,
    /// CRM state: `started`, `stopped`, `migrate`, `relocate`, `fence`, `recovery`, ...
    pub state: String,
    /// Target of a move in progress.
    pub target: Option<String>,
    /// The node it was moved away from for maintenance (to return to).
    pub maintenance_node: Option<String>,
    /// A request waiting for the manager.
    pub request: Option<HaRequest>,
}

impl ServiceStatus {
    /// The settled status of a guest under `conf`.
    pub fn settled(guest: &Guest, conf: &HaResourceConf) -> Self {
        let state = match conf.state.as_str() {
            "ignored" => "ignored",
            "disabled" | "stopped" => "stopped",
            _ if guest.running => "started",
            _ => "stopped",
        };
        ServiceStatus {
            node: guest.node.clone(),
            state: state.into(),
            target: None,
            maintenance_node: None,
            request: None,
        }
    }
}

/// HA configuration and state.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HaState {
    /// Resources by sid (`vm:100`).
    pub resources: BTreeMap<String, HaResourceConf>,
    /// Rules in config order.
    pub rules: Vec<HaRule>,
    /// Service status by sid.
    pub services: BTreeMap<String, ServiceStatus>,
    /// The node of the active CRM.
    pub master: Option<String>,
}

impl World {
    /// Whether `sid` is managed by HA (configured and not `ignored`).
    pub fn is_ha_managed(&self, sid: &str) -> bool {
        self.ha
            .resources
            .get(sid)
            .is_some_and(|r| r.state != "ignored")
    }

    /// Whether HA is in use at all (any resource, or a node in maintenance).
    pub fn ha_in_use(&self) -> bool {
        !self.ha.resources.is_empty() || self.nodes.values().any(|n| n.ha_maintenance)
    }

    /// The HA state of a node: `online`, `maintenance` or `unknown`.
    pub fn ha_node_state(&self, node: &str) -> &'static str {
        match self.nodes.get(node) {
            Some(n) if !n.online => "unknown",
            Some(n) if n.ha_maintenance => "maintenance",
            Some(_) => "online",
            None => "gone",
        }
    }

    /// The active CRM's node: the configured master if online, else the first online node.
    pub fn ha_master(&self) -> Option<String> {
        self.ha
            .master
            .clone()
            .filter(|m| self.nodes.get(m).is_some_and(|n| n.online))
            .or_else(|| {
                self.nodes
                    .values()
                    .find(|n| n.online)
                    .map(|n| n.name.clone())
            })
    }

    /// Queues a request for the HA manager; it acts after the HA delay.
    pub(crate) fn ha_request(&mut self, sid: &str, request: HaRequest) {
        if let Some(s) = self.ha.services.get_mut(sid) {
            s.request = Some(request);
        }
        let at = self.now + self.settings.ha_delay;
        self.schedule(
            at,
            Action::HaAct {
                sid: sid.to_string(),
            },
        );
    }

    /// The best node for `sid`: online, not in maintenance, allowed by its rules, with room;
    /// highest node-affinity priority first, then most free memory, then name.
    fn ha_pick_node(&self, sid: &str, exclude: &str) -> Option<String> {
        let vmid: u32 = sid.split_once(':')?.1.parse().ok()?;
        let guest = self.guests.get(&vmid)?;
        let d = self.demand(guest);
        let need = d.host_mem.max(d.mem);
        let affinity = self.ha_node_affinity(sid);
        let mut best: Option<(i64, u64, String)> = None;
        for n in self.nodes.values() {
            if n.name == exclude || !n.online || n.ha_maintenance {
                continue;
            }
            let prio = match &affinity {
                Some((nodes, strict)) => match nodes.get(&n.name) {
                    Some(p) => *p,
                    None if *strict => continue,
                    None => -1,
                },
                None => 0,
            };
            if !self.ha_blockers(sid, &n.name).is_empty() {
                continue;
            }
            let free = self.free_mem(&n.name);
            if free < need {
                continue;
            }
            let better = match &best {
                None => true,
                Some((bp, bf, bn)) => {
                    (prio, free, std::cmp::Reverse(&n.name)) > (*bp, *bf, std::cmp::Reverse(bn))
                }
            };
            if better {
                best = Some((prio, free, n.name.clone()));
            }
        }
        best.map(|(_, _, n)| n)
    }

    /// The HA manager acts on `sid`'s queued request.
    pub(crate) fn on_ha_act(&mut self, sid: &str) {
        let Some(request) = self.ha.services.get_mut(sid).and_then(|s| s.request.take()) else {
            return;
        };
        let Some(vmid) = sid.split_once(':').and_then(|(_, v)| v.parse::<u32>().ok()) else {
            return;
        };
        let Some(guest) = self.guests.get(&vmid).cloned() else {
            return;
        };
        let crm = self.ha_master().unwrap_or_else(|| guest.node.clone());
        match request {
            HaRequest::Migrate(ref target) | HaRequest::Relocate(ref target)
                if *target == guest.node => {}
            HaRequest::Migrate(ref target) | HaRequest::Relocate(ref target) => {
                let target = target.clone();
                let target_ok = self
                    .nodes
                    .get(&target)
                    .is_some_and(|n| n.online && !n.ha_maintenance);
                if !target_ok
                    || !self.ha_blockers(sid, &target).is_empty()
                    || guest.lock().is_some()
                {
                    // The CRM ignores a command it cannot carry out; the service stays.
                    return;
                }
                let relocate = matches!(request, HaRequest::Relocate(_))
                    || guest.kind == super::GuestKind::Lxc;
                if let Some(s) = self.ha.services.get_mut(sid) {
                    s.state = if relocate { "relocate" } else { "migrate" }.into();
                    s.target = Some(target.clone());
                }
                let _ = crm;
                self.begin_migration(MigrateRequest {
                    kind: guest.kind,
                    node: guest.node.clone(),
                    vmid,
                    target: target.clone(),
                    // Containers move offline after a shutdown (pve-ha-manager
                    // `PVE/HA/Resources/PVECT.pm`, `migrate`: `online => 0`).
                    online: guest.kind == super::GuestKind::Qemu,
                    with_local_disks: false,
                    restart: relocate,
                    bwlimit_kib: None,
                    user: "root@pam".into(),
                });
                for partner in self.ha_positive_partners(sid) {
                    let elsewhere = self
                        .ha
                        .services
                        .get(&partner)
                        .is_some_and(|s| s.node != target && s.target.is_none());
                    if elsewhere {
                        self.ha_request(&partner, HaRequest::Migrate(target.clone()));
                    }
                }
            }
            HaRequest::Start => {
                if !guest.running {
                    let _ = self.power(vmid, PowerOp::Start, "root@pam", false);
                }
                // qemu-server's and pve-container's start refuse a locked guest (a container's
                // `mounted` lock excepted); HA's restart and relocation attempts fail on the same
                // lock and the CRM gives the service up (pve-ha-manager
                // `Manager::next_state_started`): `error`, until the user disables it.
                let locked = guest
                    .lock()
                    .is_some_and(|l| !(guest.kind == super::GuestKind::Lxc && l == "mounted"));
                let failed = !guest.running && locked;
                if let Some(s) = self.ha.services.get_mut(sid) {
                    s.state = if failed { "error" } else { "started" }.into();
                }
                if !failed {
                    // Started where it stood: the next round may fail it back.
                    self.ha_schedule_round();
                }
            }
            HaRequest::Stop => {
                if guest.running {
                    let _ = self.power(vmid, PowerOp::Stop, "root@pam", false);
                }
                if let Some(s) = self.ha.services.get_mut(sid) {
                    s.state = "stopped".into();
                }
            }
        }
    }

    /// A migration of `vmid` settled: HA's service follows (`landed` is the new node, if any).
    pub(crate) fn ha_migration_settled(&mut self, vmid: u32, landed: Option<&str>) {
        let Some(guest) = self.guests.get(&vmid) else {
            return;
        };
        let sid = guest.sid();
        let running = guest.running;
        if let Some(s) = self.ha.services.get_mut(&sid) {
            if let Some(node) = landed {
                s.node = node.to_string();
            }
            if s.target.is_some() || matches!(s.state.as_str(), "migrate" | "relocate") {
                s.state = if running { "started" } else { "stopped" }.into();
            }
            s.target = None;
        }
        // A landed move may leave it off its preferred nodes (a failed one is not retried
        // until something else changes, so a hopeless failback does not loop).
        if landed.is_some() && self.is_ha_managed(&sid) {
            self.ha_schedule_round();
        }
    }

    /// Turns HA maintenance of `node` on or off, as `ha-manager crm-command node-maintenance`
    /// does: on moves its HA services away, off brings those back.
    pub fn set_maintenance(&mut self, node: &str, on: bool) {
        let Some(n) = self.nodes.get_mut(node) else {
            return;
        };
        if n.ha_maintenance == on {
            return;
        }
        n.ha_maintenance = on;
        tracing::info!(node, on, "HA maintenance");
        let sids: Vec<String> = self.ha.services.keys().cloned().collect();
        for sid in sids {
            if !self.is_ha_managed(&sid) {
                continue;
            }
            let Some(s) = self.ha.services.get(&sid).cloned() else {
                continue;
            };
            if on && s.node == node && s.state == "started" {
                if let Some(target) = self.ha_pick_node(&sid, node) {
                    if let Some(svc) = self.ha.services.get_mut(&sid) {
                        svc.maintenance_node = Some(node.to_string());
                    }
                    self.ha_request(&sid, HaRequest::Migrate(target));
                }
            } else if !on && s.maintenance_node.as_deref() == Some(node) {
                if let Some(svc) = self.ha.services.get_mut(&sid) {
                    svc.maintenance_node = None;
                }
                if s.node != node {
                    self.ha_request(&sid, HaRequest::Migrate(node.to_string()));
                }
            }
        }
        if !on {
            self.ha_schedule_round();
        }
    }

    /// Takes a node offline or brings it back. Offline nodes answer nothing; HA fences them after
    /// the fence delay and recovers their services elsewhere.
    pub fn set_online(&mut self, node: &str, online: bool) {
        let now = self.now;
        let delay = self.settings.fence_delay;
        let Some(n) = self.nodes.get_mut(node) else {
            return;
        };
        if n.online == online {
            return;
        }
        n.online = online;
        tracing::info!(node, online, "node status changed");
        if online {
            n.offline_since = None;
            n.booted_at = now;
        } else {
            n.offline_since = Some(now);
        }
        if online {
            // A preferred node is back: services fail back to it.
            self.ha_schedule_round();
        } else {
            self.schedule(
                now + delay,
                Action::HaFence {
                    node: node.to_string(),
                },
            );
        }
    }

    /// Fences a node that is still offline and recovers its started HA services elsewhere.
    pub(crate) fn on_ha_fence(&mut self, node: &str) {
        if self.nodes.get(node).is_none_or(|n| n.online) {
            return;
        }
        let now = self.now;
        let sids: Vec<String> = self
            .ha
            .services
            .iter()
            .filter(|(_, s)| s.node == node)
            .map(|(sid, _)| sid.clone())
            .collect();
        for sid in sids {
            let wants_running = self
                .ha
                .resources
                .get(&sid)
                .is_some_and(|r| matches!(r.state.as_str(), "started" | "enabled"));
            if !wants_running {
                continue;
            }
            let Some(vmid) = sid.split_once(':').and_then(|(_, v)| v.parse::<u32>().ok()) else {
                continue;
            };
            // Recovery starts the guest afresh on the chosen node: its memory moves there.
            if let Some(g) = self.guests.get_mut(&vmid) {
                g.running = false;
                g.config.values.remove("lock");
            }
            self.release_reservation(vmid);
            let target = self.ha_pick_node(&sid, node);
            let Some(target) = target else {
                if let Some(s) = self.ha.services.get_mut(&sid) {
                    s.state = "recovery".into();
                }
                continue;
            };
            tracing::info!(%sid, from = node, to = %target, "HA recovered service");
            if let Some(g) = self.guests.get_mut(&vmid) {
                g.node = target.clone();
                g.running = true;
                g.started_at = now;
            }
            if let Some(s) = self.ha.services.get_mut(&sid) {
                s.node = target;
                s.state = "started".into();
                s.target = None;
            }
        }
    }
}
