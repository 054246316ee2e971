//! HA rules: parsing their node and resource lists, Proxmox's feasibility checks (the `errors`
//! of `GET /cluster/ha/rules`), and what the rules say about one resource (allowed nodes,
//! partners, blockers).

use std::collections::{BTreeMap, BTreeSet};

use flxp_core::snapshot::raw::HaRule;
use serde_json::{Value, json};

use super::World;

/// A node-affinity rule's nodes: name → priority.
pub(crate) fn rule_nodes(rule: &HaRule) -> BTreeMap<String, i64> {
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
pub(crate) fn rule_resources(rule: &HaRule) -> BTreeSet<String> {
    rule.resources
        .as_deref()
        .map(crate::tags::split_list)
        .unwrap_or_default()
        .into_iter()
        .map(str::to_string)
        .collect()
}

pub(crate) fn enabled(rule: &HaRule) -> bool {
    !rule.disable.unwrap_or(false)
}

/// The `rules` whose `field` (`type`, `affinity`) is `value`.
fn rules_where<'a>(
    rules: &[&'a HaRule],
    field: fn(&HaRule) -> &Option<String>,
    value: &str,
) -> Vec<&'a HaRule> {
    rules
        .iter()
        .copied()
        .filter(|r| field(r).as_deref() == Some(value))
        .collect()
}

impl World {
    /// Rules whose feasibility check fails, with their errors: rule → option → messages.
    pub fn ha_rule_errors(&self) -> BTreeMap<String, BTreeMap<String, Vec<String>>> {
        let mut errors: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
        let active: Vec<&HaRule> = self.ha.rules.iter().filter(|r| enabled(r)).collect();
        let id = |r: &HaRule| r.rule.clone().unwrap_or_default();
        // A scenario (or a resource removed later) can leave a rule naming what the API would
        // refuse to save; Proxmox serves such a rule with `errors` and HA ignores it.
        let mut ref_errors: Vec<(String, &str, String)> = Vec::new();
        for r in &active {
            let (unmanaged, missing) = self.rule_bad_refs(r);
            if !unmanaged.is_empty() {
                ref_errors.push((
                    id(r),
                    "resources",
                    format!("cannot use unmanaged resource(s) {}.", unmanaged.join(", ")),
                ));
            }
            if !missing.is_empty() {
                ref_errors.push((
                    id(r),
                    "nodes",
                    format!("cannot use non-existant node(s) {}.", missing.join(", ")),
                ));
            }
        }
        for (rule, key, msg) in ref_errors {
            errors
                .entry(rule)
                .or_default()
                .entry(key.into())
                .or_default()
                .push(msg);
        }
        let mut push = |rule: &str, msg: String| {
            errors
                .entry(rule.to_string())
                .or_default()
                .entry("resources".into())
                .or_default()
                .push(msg);
        };
        let node_aff = rules_where(&active, |r| &r.kind, "node-affinity");
        let res_aff = rules_where(&active, |r| &r.kind, "resource-affinity");
        let positive = rules_where(&res_aff, |r| &r.affinity, "positive");
        let negative = rules_where(&res_aff, |r| &r.affinity, "negative");

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

    /// The resources a rule names that are not HA resources, and the nodes it names that do not
    /// exist (the API's own refusals, `cannot use unmanaged resource(s) ...`).
    pub(crate) fn rule_bad_refs(&self, rule: &HaRule) -> (Vec<String>, Vec<String>) {
        let unmanaged = rule_resources(rule)
            .into_iter()
            .filter(|sid| !self.ha.resources.contains_key(sid))
            .collect();
        let missing = rule_nodes(rule)
            .into_keys()
            .filter(|n| !self.nodes.contains_key(n))
            .collect();
        (unmanaged, missing)
    }

    /// The effective node-affinity of `sid`: allowed nodes with priorities (`None`: any node).
    pub(crate) fn ha_node_affinity(&self, sid: &str) -> Option<(BTreeMap<String, i64>, bool)> {
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
    pub(crate) fn ha_partners(&self, sid: &str, affinity: &str) -> BTreeSet<String> {
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
}
