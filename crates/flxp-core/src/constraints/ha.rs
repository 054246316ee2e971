//! Proxmox HA rules as flxp rules: node-affinity and resource-affinity.
//!
//! Strict node-affinity is a hard node rule; every node-affinity rule also gives a preference for
//! its highest priority class (unlisted nodes rank below all listed ones, as Proxmox compiles
//! non-strict rules with priority −1). Resource-affinity is always hard. Disabled rules and rules
//! Proxmox itself marked infeasible (`errors`) are skipped with a warning.

use super::rules::{GroupKind, NodeRule, Preference, Rules};
use crate::cluster::{Cluster, GuestIdx, NodeIdx};
use crate::warning::Warning;

pub(super) fn compile(cluster: &Cluster, rules: &mut Rules) {
    for rule in &cluster.ha.rules {
        let Some(id) = rule.rule.as_deref().filter(|r| !r.is_empty()) else {
            rules
                .warnings
                .push(Warning::general("an HA rule without an id; ignored"));
            continue;
        };
        let name = format!("ha:{id}");
        if rule.disable == Some(true) {
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
                for g in members {
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
                            format!("resource-affinity with affinity {other:?} (want positive or negative); ignored"),
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
                }
            }
            other => rules.warnings.push(Warning::about(
                &name,
                format!("unknown HA rule type {other:?}; ignored"),
            )),
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
    for sid in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (prefix, id) = sid.split_once(':').unwrap_or(("vm", sid));
        let guest = id
            .parse::<u32>()
            .ok()
            .and_then(|vmid| cluster.guest_idx(vmid))
            .filter(|&g| cluster.guest(g).kind.ha_prefix() == prefix);
        match guest {
            Some(g) => out.push(g),
            None => rules.warnings.push(Warning::about(
                name,
                format!("HA resource `{sid}` is not a guest of the cluster; skipped"),
            )),
        }
    }
    out.sort();
    out.dedup();
    out
}

/// `node[:priority]` list to (node, priority); unknown nodes and bad priorities are warnings.
fn parse_nodes(
    cluster: &Cluster,
    rules: &mut Rules,
    name: &str,
    list: &str,
) -> Vec<(NodeIdx, i64)> {
    let mut out: Vec<(NodeIdx, i64)> = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (node, prio) = match item.split_once(':') {
            Some((n, p)) => match p.trim().parse::<i64>() {
                Ok(p) => (n.trim(), p),
                Err(_) => {
                    rules.warnings.push(Warning::about(
                        name,
                        format!("node `{item}` has a priority that is not a number; read as 0"),
                    ));
                    (n.trim(), 0)
                }
            },
            None => (item, 0),
        };
        match cluster.node_idx_loose(node) {
            Some(n) if !out.iter().any(|(m, _)| *m == n) => out.push((n, prio)),
            Some(_) => {}
            None => rules.warnings.push(Warning::about(
                name,
                format!("names node `{node}`, which is not in the cluster"),
            )),
        }
    }
    out.sort();
    out
}
