//! Proxmox HA rules as flxp rules: node-affinity and resource-affinity.
//!
//! Strict node-affinity is a hard node rule; every node-affinity rule also gives a preference for
//! its highest priority class (unlisted nodes rank below all listed ones, as Proxmox compiles
//! non-strict rules with priority −1). Resource-affinity is always hard. Disabled rules and rules
//! Proxmox itself marked infeasible (`errors`) are skipped with a warning.
//!
//! With `failback` (the default), HA moves a started resource back into the highest priority class
//! of the nodes it counts as online every round (docs/proxmox-behaviour.md §1.6): a guest already
//! there may only move within that class, or HA would undo the move and the two schedulers would
//! take turns.

use std::collections::{HashMap, HashSet};

use super::rules::{GroupKind, NodeRule, Preference, Rules};
use crate::cluster::{Cluster, GuestIdx, MaintenanceSource, NodeIdx};
use crate::snapshot::HaResource;
use crate::warning::{CappedWarnings, Warning};

pub(super) fn compile(cluster: &Cluster, rules: &mut Rules) {
    let mut failback: Vec<(GuestIdx, NodeRule)> = Vec::new();
    // Sets and maps, not scans: rules may list any number of resources.
    let mut in_resource_affinity: HashSet<GuestIdx> = HashSet::new();
    let mut ha_resources: HashMap<&str, &HaResource> = HashMap::new();
    for r in &cluster.ha.resources {
        if let Some(sid) = r.sid.as_deref() {
            // The first entry of a sid counts, as a scan from the front would find it.
            ha_resources.entry(sid).or_insert(r);
        }
    }
    for rule in &cluster.ha.rules {
        let Some(id) = rule.rule.as_deref().filter(|r| !r.is_empty()) else {
            rules
                .warnings
                .push(Warning::general("an HA rule without an id; ignored"));
            continue;
        };
        let name = format!("ha:{id}");
        if rule.disable == Some(true) {
            rules
                .warnings
                .push(Warning::about(&name, "the HA rule is disabled; ignored"));
            continue;
        }
        if let Some(errors) = &rule.errors {
            if !errors.is_null() && errors.as_object().is_none_or(|o| !o.is_empty()) {
                rules.warnings.push(Warning::about(
                    &name,
                    format!("Proxmox HA reports this rule infeasible ({errors}); ignored"),
                ));
                continue;
            }
        }
        let members = resolve_resources(
            cluster,
            rules,
            &name,
            rule.resources.as_deref().unwrap_or(""),
        );
        match rule.kind.as_deref() {
            Some("node-affinity") => {
                let nodes = parse_nodes(cluster, rules, &name, rule.nodes.as_deref().unwrap_or(""));
                if nodes.is_empty() {
                    rules.warnings.push(Warning::about(
                        &name,
                        "node-affinity rule lists no known node; ignored",
                    ));
                    continue;
                }
                let mut allowed: Vec<NodeIdx> = nodes.iter().map(|(n, _)| *n).collect();
                allowed.sort();
                allowed.dedup();
                let strict = rule.strict == Some(true);
                let top = failback_class(cluster, &nodes);
                for g in members {
                    if let Some(top) = top.as_ref().filter(|t| {
                        fails_back(cluster, &ha_resources, g)
                            && t.binary_search(&cluster.guest(g).node).is_ok()
                    }) {
                        failback.push((
                            g,
                            NodeRule {
                                rule: format!("{name} (failback)"),
                                nodes: top.clone(),
                            },
                        ));
                    }
                    let r = &mut rules.guests[g.get()];
                    if strict {
                        r.node_rules.push(NodeRule {
                            rule: name.clone(),
                            nodes: allowed.clone(),
                        });
                    }
                    let min = nodes.iter().map(|(_, p)| *p).min().unwrap_or(0);
                    r.preferences.push(Preference {
                        rule: name.clone(),
                        priorities: nodes.clone(),
                        default: min.min(0) - 1,
                    });
                }
            }
            Some("resource-affinity") => {
                let kind = match rule.affinity.as_deref() {
                    Some("positive") => GroupKind::Affinity,
                    Some("negative") => GroupKind::AntiAffinity,
                    other => {
                        rules.warnings.push(Warning::about(
                            &name,
                            match other {
                                Some(a) => format!("resource-affinity with affinity `{a}` (want positive or negative); ignored"),
                                None => "resource-affinity without an affinity (want positive or negative); ignored".to_owned(),
                            },
                        ));
                        continue;
                    }
                };
                if members.len() < 2 {
                    rules.warnings.push(Warning::about(
                        &name,
                        "resource-affinity rule names fewer than two known guests; nothing to enforce",
                    ));
                }
                for g in members {
                    let id = rules.join(Some(g), &name, kind, true);
                    rules.guests[g.get()].groups.push(id);
                    in_resource_affinity.insert(g);
                }
            }
            other => rules.warnings.push(Warning::about(
                &name,
                match other {
                    Some(t) => format!(
                        "unknown HA rule type `{t}` (want node-affinity or resource-affinity); ignored"
                    ),
                    None => "an HA rule without a type; ignored".to_owned(),
                },
            )),
        }
    }
    // HA weighs its own resource affinity before failback (docs/proxmox-behaviour.md §1.6): a guest
    // it keeps apart from or together with others may legitimately stay off its top class.
    for (g, rule) in failback {
        if !in_resource_affinity.contains(&g) {
            rules.guests[g.get()].node_rules.push(rule);
        }
    }
}

fn resolve_resources(
    cluster: &Cluster,
    rules: &mut Rules,
    name: &str,
    list: &str,
) -> Vec<GuestIdx> {
    let mut out = Vec::new();
    let mut unknown = CappedWarnings::new(name);
    for sid in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (prefix, id) = sid.split_once(':').unwrap_or(("vm", sid));
        let guest = id
            .parse::<u32>()
            .ok()
            .and_then(|vmid| cluster.guest_idx(vmid))
            .filter(|&g| cluster.guest(g).kind.ha_prefix() == prefix);
        match guest {
            Some(g) => out.push(g),
            None => unknown.push(format!(
                "HA resource `{sid}` is not a guest of the cluster; skipped"
            )),
        }
    }
    unknown.finish(
        "HA resources that are not guests of the cluster, skipped",
        &mut rules.warnings,
    );
    out.sort();
    out.dedup();
    out
}

/// The listed nodes of the highest priority among those HA counts as online (not in HA
/// maintenance, not fenced or lost); `None` when no listed node is (then any node will do).
fn failback_class(cluster: &Cluster, nodes: &[(NodeIdx, i64)]) -> Option<Vec<NodeIdx>> {
    let up = |n: NodeIdx| {
        let node = cluster.node(n);
        node.is_online()
            && !node.maintenance.contains(&MaintenanceSource::Ha)
            && node.ha_lost().is_none()
    };
    let best = nodes
        .iter()
        .filter(|(n, _)| up(*n))
        .map(|(_, p)| *p)
        .max()?;
    let mut top: Vec<NodeIdx> = nodes
        .iter()
        .filter(|(n, p)| *p == best && up(*n))
        .map(|(n, _)| *n)
        .collect();
    top.sort();
    Some(top)
}

/// Whether HA would move the guest back: its resource is started and has failback on (default).
fn fails_back(cluster: &Cluster, resources: &HashMap<&str, &HaResource>, g: GuestIdx) -> bool {
    let guest = cluster.guest(g);
    let sid = format!("{}:{}", guest.kind.ha_prefix(), guest.vmid);
    resources.get(sid.as_str()).is_some_and(|r| {
        r.failback != Some(false) && matches!(r.state.as_deref(), Some("started" | "enabled"))
    })
}

/// `node[:priority]` list to (node, priority); unknown nodes and bad priorities are warnings.
fn parse_nodes(
    cluster: &Cluster,
    rules: &mut Rules,
    name: &str,
    list: &str,
) -> Vec<(NodeIdx, i64)> {
    let mut out: Vec<(NodeIdx, i64)> = Vec::new();
    let mut seen = vec![false; cluster.nodes().len()];
    let mut bad = CappedWarnings::new(name);
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (node, prio) = match item.split_once(':') {
            Some((n, p)) => match p.trim().parse::<i64>() {
                Ok(p) => (n.trim(), p),
                Err(_) => {
                    bad.push(format!(
                        "node `{item}` has a priority that is not a number; read as 0"
                    ));
                    (n.trim(), 0)
                }
            },
            None => (item, 0),
        };
        match cluster.node_idx_loose(node) {
            Some(n) if !std::mem::replace(&mut seen[n.get()], true) => out.push((n, prio)),
            Some(_) => {}
            None => bad.push(format!("names node `{node}`, which is not in the cluster")),
        }
    }
    bad.finish("node entries with problems like these", &mut rules.warnings);
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    // Tests may panic on malformed fixtures: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use crate::cluster::{Cluster, Overrides};
    use crate::constraints::Rules;

    #[test]
    fn a_rule_naming_100000_unknown_resources_warns_ten_times_and_sums_up() {
        let unknown: Vec<String> = (0..100_000).map(|i| format!("vm:{}", 10_000 + i)).collect();
        let doc = format!(
            r#"{{"resources": [
            {{"id":"node/a","type":"node","node":"a","status":"online","maxmem":1073741824,"maxcpu":4}},
            {{"id":"qemu/100","type":"qemu","vmid":100,"node":"a","status":"running","maxmem":1,"maxcpu":1}},
            {{"id":"qemu/101","type":"qemu","vmid":101,"node":"a","status":"running","maxmem":1,"maxcpu":1}}],
          "ha": {{"resources": [{{"sid":"vm:100"}},{{"sid":"vm:101"}}], "rules": [
            {{"rule":"apart","type":"resource-affinity","resources":"vm:100,vm:101,{}","affinity":"negative"}}]}}}}"#,
            unknown.join(",")
        );
        let c = Cluster::from_json(&doc, &Overrides::default()).unwrap();
        let r = Rules::compile(&c);
        let w: Vec<String> = r.warnings.iter().map(ToString::to_string).collect();
        assert_eq!(w.len(), 11, "{w:#?}");
        assert_eq!(
            w[0],
            "ha:apart: HA resource `vm:10000` is not a guest of the cluster; skipped"
        );
        assert_eq!(
            w[10],
            "ha:apart: 99990 more HA resources that are not guests of the cluster, skipped (not listed)"
        );
        assert_eq!(r.groups.len(), 1);
        assert_eq!(r.groups[0].members.len(), 2);
    }

    #[test]
    fn skipped_rules_say_why_in_words() {
        let doc = r#"{"resources": [
            {"id":"node/a","type":"node","node":"a","status":"online","maxmem":1073741824,"maxcpu":4},
            {"id":"qemu/100","type":"qemu","vmid":100,"node":"a","status":"running","maxmem":1,"maxcpu":1},
            {"id":"qemu/101","type":"qemu","vmid":101,"node":"a","status":"running","maxmem":1,"maxcpu":1}],
          "ha": {"resources": [{"sid":"vm:100"},{"sid":"vm:101"}], "rules": [
            {"rule":"apart","type":"resource-affinity","resources":"vm:100,vm:101","affinity":"negative","disable":1},
            {"rule":"odd","type":"resource-affinity","resources":"vm:100,vm:101","affinity":"sideways"},
            {"rule":"weird","type":"weird","resources":"vm:100"}]}}"#;
        let c = Cluster::from_json(doc, &Overrides::default()).unwrap();
        let r = Rules::compile(&c);
        let w: Vec<String> = r.warnings.iter().map(ToString::to_string).collect();
        assert!(
            w.iter()
                .any(|w| w.contains("ha:apart") && w.contains("the HA rule is disabled; ignored")),
            "{w:?}"
        );
        assert!(
            w.iter()
                .any(|w| w.contains("ha:odd") && w.contains("affinity `sideways`")),
            "{w:?}"
        );
        assert!(
            w.iter()
                .any(|w| w.contains("ha:weird") && w.contains("unknown HA rule type `weird`")),
            "{w:?}"
        );
        assert!(w.iter().all(|w| !w.contains("Some(")), "{w:?}");
        assert!(r.groups.is_empty(), "no rule took effect");
    }
}
