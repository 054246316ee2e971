//! The CRM round that fails services back: a started HA resource with `failback` whose node is not
//! in the highest-priority online class of its node-affinity rule is migrated back to that class,
//! as pve-ha-manager's `select_service_node` does with preference `none` (see
//! `docs/proxmox-behaviour.md` §1.6). Rounds run one HA delay after something that can change the
//! answer: a scenario load, a guest landing, a node coming back, maintenance ending, a rule or
//! resource change.

use std::collections::BTreeMap;

use super::{Action, HaRequest, World};

impl World {
    /// Asks for a CRM round one HA delay from now (at most one pending). Without rules there is
    /// nothing to fail back to, so no round is scheduled.
    pub(crate) fn ha_schedule_round(&mut self) {
        if self.ha_round_pending || self.ha.rules.is_empty() || self.ha.resources.is_empty() {
            return;
        }
        self.ha_round_pending = true;
        let at = self.now + self.settings.ha_delay;
        self.schedule(at, Action::HaRound);
    }

    /// One CRM round: every service that should fail back starts moving, in sid order.
    pub(crate) fn on_ha_round(&mut self) {
        self.ha_round_pending = false;
        let sids: Vec<String> = self.ha.services.keys().cloned().collect();
        for sid in sids {
            let Some(target) = self.ha_failback_target(&sid) else {
                continue;
            };
            tracing::info!(%sid, to = %target, "HA failback");
            if let Some(s) = self.ha.services.get_mut(&sid) {
                s.request = Some(HaRequest::Migrate(target));
            }
            // Acted on at once: the round is the CRM acting.
            self.on_ha_act(&sid);
        }
    }

    /// Where `sid` fails back to, if it should move: its rule's online nodes of the highest
    /// priority, minus nodes HA rules block, when its node is not among them. Among several,
    /// the one with the fewest HA services, then the first by name (the `basic` CRS scoring;
    /// the sim uses it for `static` and `dynamic` too).
    pub(crate) fn ha_failback_target(&self, sid: &str) -> Option<String> {
        let conf = self.ha.resources.get(sid)?;
        if !conf.failback || !matches!(conf.state.as_str(), "started" | "enabled") {
            return None;
        }
        let service = self.ha.services.get(sid)?;
        if service.state != "started" || service.target.is_some() || service.request.is_some() {
            return None;
        }
        let vmid: u32 = sid.split_once(':')?.1.parse().ok()?;
        let guest = self.guests.get(&vmid)?;
        if !guest.running || guest.lock().is_some() {
            return None;
        }
        let (nodes, _strict) = self.ha_node_affinity(sid)?;
        let online = |n: &str| {
            self.nodes
                .get(n)
                .is_some_and(|n| n.online && !n.ha_maintenance)
        };
        // Non-strict rules rank the other nodes at -1: with a rule node online, they are never
        // in the top class; with none online, the current node is as good as any.
        let top = nodes
            .iter()
            .filter(|(n, _)| online(n))
            .map(|(_, p)| *p)
            .max()?;
        let class: Vec<&String> = nodes
            .iter()
            .filter(|(n, p)| **p == top && online(n))
            .map(|(n, _)| n)
            .collect();
        if class.contains(&&guest.node) {
            return None;
        }
        let counts = self.ha_service_counts();
        class
            .into_iter()
            .filter(|n| self.ha_blockers(sid, n).is_empty())
            .min_by_key(|n| (counts.get(*n).copied().unwrap_or(0), (*n).clone()))
            .cloned()
    }

    /// HA services per node as the `basic` scheduler counts them: active services on their
    /// node, moving ones on their target too.
    fn ha_service_counts(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for s in self.ha.services.values() {
            if !matches!(
                s.state.as_str(),
                "started" | "migrate" | "relocate" | "fence" | "recovery"
            ) {
                continue;
            }
            *counts.entry(s.node.clone()).or_insert(0) += 1;
            if let Some(t) = &s.target {
                *counts.entry(t.clone()).or_insert(0) += 1;
            }
        }
        counts
    }
}
