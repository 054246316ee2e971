//! [`Rules::compile`]: the guests' tags, then the HA rules, then the conflicts among them, in
//! a file of its own so that the rule types below do not import the passes that fill them.

use super::rules::{GuestRules, Rules, compile_tags};
use super::tags::is_rule_tag;
use super::{conflicts, ha};
use crate::cluster::Cluster;

impl Rules {
    /// Compiles every guest's tags and the HA rules of a cluster.
    pub fn compile(cluster: &Cluster) -> Self {
        let mut rules = Self {
            guests: vec![GuestRules::default(); cluster.guests().len()],
            ..Self::default()
        };
        for idx in cluster.guest_indexes() {
            let g = cluster.guest(idx);
            if !g.tags.iter().any(|t| is_rule_tag(t)) {
                continue;
            }
            let subject = format!("{} {}", g.kind.as_str(), g.label());
            let mut warnings = Vec::new();
            let compiled = compile_tags(
                cluster,
                &g.tags,
                &subject,
                &mut warnings,
                &mut |name, kind, hard| Some(rules.join(Some(idx), name, kind, hard)),
            );
            rules.warnings.extend(warnings);
            rules.guests[idx.get()] = compiled;
        }
        ha::compile(cluster, &mut rules);
        for r in &mut rules.guests {
            r.groups.sort();
            r.groups.dedup();
        }
        rules.conflicts = conflicts::find(cluster, &rules);
        rules
    }
}
