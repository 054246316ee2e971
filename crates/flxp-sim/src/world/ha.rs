//! High availability: HA resources and rules, the service states the HA manager keeps, its
//! reactions (queued migrations, maintenance evacuation and return, fencing and recovery of a
//! dead node's services), rule feasibility errors, and the status views.

use std::collections::{BTreeMap, BTreeSet};

use flxp_core::snapshot::raw::{HaResource, HaRule};
use flxp_pve::types::ha::{
    HaQuorum, LrmStatus, ManagerStatus, ManagerStatusResponse, NodeRequest,
    ServiceStatus as WireServiceStatus,
};
use serde_json::{Value, json};

use super::migrate::MigrationPlan;
use super::{Action, Guest, PowerOp, World};
use crate::clock::perl_localtime;

/// An HA resource's configuration (`/cluster/ha/resources`).
#[derive(Debug, Clone, PartialEq)]
pub struct HaResourceConf {
    /// Requested state: `started`, `stopped`, `enabled`, `disabled`, `ignored`.
    pub state: String,
    /// Maximal restarts on one node.
    pub max_restart: u64,
    /// Maximal relocations.
    pub max_relocate: u64,
    /// Whether HA moves it back to its preferred node.
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

/// A node-affinity rule's nodes: name → priority.
fn rule_nodes(rule: &HaRule) -> BTreeMap<String, i64> {
    rule.nodes
        .as_deref()
        .map(crate::tags::split_list)
        .unwrap_or_default()
        .into_iter()
        .map(|n| match n.split_once(':') {
            Some((name, prio)) => (name.to_string(), prio.parse().unwrap_or(0)),
            None => (n.to_string(), 0),
        })
        .collect()
}

/// A rule's resources.
fn rule_resources(rule: &HaRule) -> BTreeSet<String> {
    rule.resources
        .as_deref()
        .map(crate::tags::split_list)
        .unwrap_or_default()
        .into_iter()
        .map(str::to_string)
        .collect()
}

fn enabled(rule: &HaRule) -> bool {
    !rule.disable.unwrap_or(false)
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

    /// Rules whose feasibility check fails, with their errors: rule → option → messages.
    pub fn ha_rule_errors(&self) -> BTreeMap<String, BTreeMap<String, Vec<String>>> {
        let mut errors: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
        let mut push = |rule: &str, msg: String| {
            errors
                .entry(rule.to_string())
                .or_default()
                .entry("resources".into())
                .or_default()
                .push(msg);
        };
        let active: Vec<&HaRule> = self.ha.rules.iter().filter(|r| enabled(r)).collect();
        let id = |r: &HaRule| r.rule.clone().unwrap_or_default();
        let node_aff: Vec<&HaRule> = active
            .iter()
            .copied()
            .filter(|r| r.kind.as_deref() == Some("node-affinity"))
            .collect();
        let res_aff: Vec<&HaRule> = active
            .iter()
            .copied()
            .filter(|r| r.kind.as_deref() == Some("resource-affinity"))
            .collect();
        let positive: Vec<&HaRule> = res_aff
            .iter()
            .copied()
            .filter(|r| r.affinity.as_deref() == Some("positive"))
            .collect();
        let negative: Vec<&HaRule> = res_aff
            .iter()
            .copied()
            .filter(|r| r.affinity.as_deref() == Some("negative"))
            .collect();

        // A resource may be in one node-affinity rule only.
        let mut users: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for r in &node_aff {
            for sid in rule_resources(r) {
                users.entry(sid).or_default().push(id(r));
            }
        }
        let mut conflicts: Vec<(String, String)> = users
            .iter()
            .filter(|(_, rules)| rules.len() > 1)
            .flat_map(|(sid, rules)| rules.iter().map(move |r| (r.clone(), sid.clone())))
            .collect();
        conflicts.sort();
        for (rule, sid) in conflicts {
            push(
                &rule,
                format!("resource '{sid}' is already used in another node affinity rule"),
            );
        }
        for r in &res_aff {
            if rule_resources(r).len() < 2 {
                push(
                    &id(r),
                    "rule is ineffective as there are less than two resources".into(),
                );
            }
        }
        for r in &negative {
            if rule_resources(r).len() > self.nodes.len() {
                push(
                    &id(r),
                    "rule defines more resources than available nodes".into(),
                );
            }
        }
        for p in &positive {
            for n in &negative {
                if rule_resources(p).intersection(&rule_resources(n)).count() >= 2 {
                    push(
                        &id(p),
                        "rule shares two or more resources with a negative resource affinity rule"
                            .into(),
                    );
                    push(
                        &id(n),
                        "rule shares two or more resources with a positive resource affinity rule"
                            .into(),
                    );
                }
            }
        }
        for n in &negative {
            let res = rule_resources(n);
            let mut located = BTreeSet::new();
            let mut allowed = BTreeSet::new();
            let mut paired = Vec::new();
            for na in &node_aff {
                let common: BTreeSet<String> =
                    res.intersection(&rule_resources(na)).cloned().collect();
                if common.is_empty() {
                    continue;
                }
                located.extend(common);
                allowed.extend(rule_nodes(na).into_keys());
                paired.push(id(na));
            }
            if allowed.len() < located.len() {
                push(&id(n), "two or more resources are restricted to less nodes than available to the resources".into());
                for p in paired {
                    push(
                        &p,
                        "at least one resource is in a negative resource affinity rule and this rule would restrict these to less nodes than available to the resources"
                            .into(),
                    );
                }
            }
        }
        errors
    }

    /// The effective node-affinity of `sid`: allowed nodes with priorities (`None`: any node).
    fn ha_node_affinity(&self, sid: &str) -> Option<(BTreeMap<String, i64>, bool)> {
        let errors = self.ha_rule_errors();
        self.ha
            .rules
            .iter()
            .filter(|r| enabled(r) && r.kind.as_deref() == Some("node-affinity"))
            .filter(|r| !errors.contains_key(r.rule.as_deref().unwrap_or_default()))
            .find(|r| rule_resources(r).contains(sid))
            .map(|r| (rule_nodes(r), r.strict.unwrap_or(false)))
    }

    /// Resources in a rule of `affinity` (`positive`/`negative`) with `sid`.
    fn ha_partners(&self, sid: &str, affinity: &str) -> BTreeSet<String> {
        let errors = self.ha_rule_errors();
        self.ha
            .rules
            .iter()
            .filter(|r| enabled(r) && r.kind.as_deref() == Some("resource-affinity"))
            .filter(|r| r.affinity.as_deref() == Some(affinity))
            .filter(|r| !errors.contains_key(r.rule.as_deref().unwrap_or_default()))
            .map(rule_resources)
            .filter(|res| res.contains(sid))
            .flatten()
            .filter(|s| s != sid)
            .collect()
    }

    /// HA resources that move along with `sid` (positive resource affinity).
    pub fn ha_positive_partners(&self, sid: &str) -> Vec<String> {
        if !self.is_ha_managed(sid) {
            return Vec::new();
        }
        self.ha_partners(sid, "positive").into_iter().collect()
    }

    /// Why HA would refuse `sid` on `node`: (blocking sid or the resource itself, cause).
    pub fn ha_blockers(&self, sid: &str, node: &str) -> Vec<(String, &'static str)> {
        if !self.is_ha_managed(sid) {
            return Vec::new();
        }
        let mut out = Vec::new();
        if let Some((nodes, strict)) = self.ha_node_affinity(sid) {
            if strict && !nodes.contains_key(node) {
                out.push((sid.to_string(), "node-affinity"));
            }
        }
        for other in self.ha_partners(sid, "negative") {
            if self.ha.services.get(&other).is_some_and(|s| s.node == node) {
                out.push((other, "resource-affinity"));
            }
        }
        out
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
        let need = guest.host_mem().max(guest.usage.mem);
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
                self.begin_migration(MigrationPlan {
                    vmid,
                    target: target.clone(),
                    online: true,
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
                if let Some(s) = self.ha.services.get_mut(sid) {
                    s.state = "started".into();
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
        if online {
            n.offline_since = None;
            n.booted_at = now;
        } else {
            n.offline_since = Some(now);
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
            self.reservations.remove(&vmid);
            let target = self.ha_pick_node(&sid, node);
            let Some(target) = target else {
                if let Some(s) = self.ha.services.get_mut(&sid) {
                    s.state = "recovery".into();
                }
                continue;
            };
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

    /// `GET /cluster/ha/status/current`.
    pub fn ha_status_current(&self) -> Vec<Value> {
        let now = self.now;
        let master = self.ha_master();
        let local = master.clone().unwrap_or_default();
        let mut out = vec![json!({
            "id": "quorum", "type": "quorum", "node": local, "status": "OK", "quorate": 1,
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
            quorate: Some(true),
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

    /// The rules list with feasibility errors (`GET /cluster/ha/rules`).
    pub fn ha_rules_view(&self, kind: Option<&str>, resource: Option<&str>) -> Vec<Value> {
        let errors = self.ha_rule_errors();
        let digest = self.ha_rules_digest();
        let mut rules: Vec<&HaRule> = self
            .ha
            .rules
            .iter()
            .filter(|r| kind.is_none_or(|k| r.kind.as_deref() == Some(k)))
            .filter(|r| resource.is_none_or(|s| rule_resources(r).contains(s)))
            .collect();
        rules.sort_by_key(|r| r.order.unwrap_or(0));
        rules
            .into_iter()
            .map(|r| {
                let mut r = r.clone();
                r.digest = Some(digest.clone());
                if r.kind.as_deref() == Some("node-affinity") && r.strict.is_none() {
                    r.strict = Some(false);
                }
                let id = r.rule.clone().unwrap_or_default();
                r.errors = errors.get(&id).map(|e| json!(e));
                serde_json::to_value(r).unwrap_or(Value::Null)
            })
            .collect()
    }

    /// Digest of the rules config.
    pub fn ha_rules_digest(&self) -> String {
        let text = serde_json::to_string(&self.ha.rules).unwrap_or_default();
        super::hex(
            ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, text.as_bytes()).as_ref(),
        )
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
