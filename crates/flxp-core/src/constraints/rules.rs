//! The compiled rules: per guest, per group, with warnings and conflicts.

use std::collections::{BTreeSet, HashMap};
use std::fmt;

use serde::Serialize;

use super::tags::{GuestToken, TagParse, parse_guest_tag};
use crate::cluster::{Cluster, GuestIdx, NodeIdx};
use crate::warning::{CappedWarnings, Warning};

/// Index of a group in `Rules::groups`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct GroupId(pub u32);

/// Together or apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum GroupKind {
    /// All running members on one node.
    Affinity,
    /// No two running members on one node.
    AntiAffinity,
}

/// A VM-VM rule: its members and whether it must or should hold.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Group {
    /// The rule's name as the user wrote it: the tag (`flxp.anti-affinity.web`,
    /// `plb_affinity_db`) or `ha:<rule-id>`.
    pub name: String,
    /// Together or apart.
    pub kind: GroupKind,
    /// Must (hard) or should (soft).
    pub hard: bool,
    /// Members, by vmid order, running or not.
    pub members: Vec<GuestIdx>,
}

/// A hard restriction of a guest to some nodes, with the rule's name.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeRule {
    /// `flxp.node`, `plb_pin` or `ha:<rule-id>`.
    pub rule: String,
    /// The allowed nodes, sorted.
    pub nodes: Vec<NodeIdx>,
}

/// A soft preference among nodes: higher priority is better, unlisted nodes get `default`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Preference {
    /// `flxp.prefer-node` or `ha:<rule-id>`.
    pub rule: String,
    /// Listed nodes and their priority, sorted by node.
    pub priorities: Vec<(NodeIdx, i64)>,
    /// Priority of every other node.
    pub default: i64,
}

impl Preference {
    /// The priority of a node under this preference.
    pub fn priority(&self, node: NodeIdx) -> i64 {
        self.priorities
            .binary_search_by_key(&node, |(n, _)| *n)
            .map_or(self.default, |i| self.priorities[i].1)
    }
}

/// Everything that constrains one guest (or one placement request).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct GuestRules {
    /// Hard node restrictions; a node must be in every one of them.
    pub node_rules: Vec<NodeRule>,
    /// Labels a node must carry (all of them).
    pub selectors: Vec<String>,
    /// Taints the guest tolerates, sorted.
    pub tolerations: Vec<String>,
    /// Soft node preferences.
    pub preferences: Vec<Preference>,
    /// Groups the guest belongs to.
    pub groups: Vec<GroupId>,
    /// Never moved by the rebalancer.
    pub ignore: bool,
}

impl GuestRules {
    /// Whether every hard node rule allows the node.
    pub fn allows(&self, node: NodeIdx) -> bool {
        self.node_rules
            .iter()
            .all(|r| r.nodes.binary_search(&node).is_ok())
    }

    /// The hard node rules that do not allow the node.
    pub fn rules_refusing(&self, node: NodeIdx) -> impl Iterator<Item = &NodeRule> {
        self.node_rules
            .iter()
            .filter(move |r| r.nodes.binary_search(&node).is_err())
    }

    /// Whether the guest tolerates a taint.
    pub fn tolerates(&self, taint: &str) -> bool {
        // Sorted, so a node with many taints costs a guest with many tolerations little.
        self.tolerations
            .binary_search_by(|t| t.as_str().cmp(taint))
            .is_ok()
    }

    /// Whether there is nothing at all to enforce or prefer.
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }
}

/// All compiled rules of a cluster.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    /// Per guest, indexed like `Cluster::guests`.
    pub guests: Vec<GuestRules>,
    /// VM-VM groups.
    pub groups: Vec<Group>,
    /// Malformed or unknown tokens, unknown nodes, ignored HA rules.
    pub warnings: Vec<Warning>,
    /// Rules that cannot all hold.
    pub conflicts: Vec<Conflict>,
    pub(super) group_by_name: HashMap<String, GroupId>,
}

/// A set of rules that cannot all hold, with the rule names and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Conflict {
    /// The rules involved, by name (`flxp.affinity.web`, `ha:keep-apart`, `flxp.node`).
    pub rules: Vec<String>,
    /// What cannot hold.
    pub message: String,
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "conflict ({}): {}", self.rules.join(", "), self.message)
    }
}

impl Rules {
    /// Compiles the tags of a placement request against the existing groups; new group names
    /// have no members yet and so constrain nothing.
    pub fn compile_request(
        &self,
        cluster: &Cluster,
        tags: &[String],
    ) -> (GuestRules, Vec<Warning>) {
        let tags: Vec<String> = tags.iter().map(|t| t.to_ascii_lowercase()).collect();
        let mut warnings = Vec::new();
        // A request joins existing groups only: looked up, never created.
        let mut r = compile_tags(
            cluster,
            &tags,
            "request",
            &mut warnings,
            &mut |name, _, _| self.group_id(name),
        );
        r.groups.sort();
        r.groups.dedup();
        (r, warnings)
    }

    /// What a plan or placement reports about the rules: the compile warnings, then each
    /// conflict as a general warning.
    pub fn report_warnings(&self) -> impl Iterator<Item = Warning> + '_ {
        self.warnings.iter().cloned().chain(
            self.conflicts
                .iter()
                .map(|c| Warning::general(c.to_string())),
        )
    }

    /// The group with this name.
    pub fn group_id(&self, name: &str) -> Option<GroupId> {
        self.group_by_name.get(name).copied()
    }

    /// The group at an index.
    pub fn group(&self, id: GroupId) -> &Group {
        &self.groups[id.get()]
    }

    /// The rules of a guest.
    pub fn guest(&self, idx: GuestIdx) -> &GuestRules {
        &self.guests[idx.get()]
    }

    pub(super) fn group_for(&mut self, name: &str, kind: GroupKind, hard: bool) -> GroupId {
        if let Some(&id) = self.group_by_name.get(name) {
            return id;
        }
        let id = GroupId(self.groups.len() as u32);
        self.groups.push(Group {
            name: name.to_owned(),
            kind,
            hard,
            members: Vec::new(),
        });
        self.group_by_name.insert(name.to_owned(), id);
        id
    }

    /// Adds a guest (if any) to a group, creating the group on first use.
    pub(super) fn join(
        &mut self,
        guest: Option<GuestIdx>,
        name: &str,
        kind: GroupKind,
        hard: bool,
    ) -> GroupId {
        let id = self.group_for(name, kind, hard);
        if let Some(g) = guest {
            // Guests are compiled one at a time, so a repeat can only be the last member.
            let members = &mut self.groups[id.get()].members;
            if members.last() != Some(&g) {
                members.push(g);
            }
        }
        id
    }
}
/// Compiles one guest's (or request's) tags; `group` resolves a group name (creating it, or not).
pub(super) fn compile_tags(
    cluster: &Cluster,
    tags: &[String],
    subject: &str,
    warnings: &mut Vec<Warning>,
    group: &mut dyn FnMut(&str, GroupKind, bool) -> Option<GroupId>,
) -> GuestRules {
    let mut out = GuestRules::default();
    let mut node_names: Vec<String> = Vec::new();
    let mut pin_names: Vec<String> = Vec::new();
    let mut prefer_names: Vec<String> = Vec::new();
    // Sets, not `Vec::contains`: a guest may carry any number of tags (see `MAX_GUEST_TAGS`).
    let mut selectors: BTreeSet<String> = BTreeSet::new();
    let mut tolerations: BTreeSet<String> = BTreeSet::new();
    let mut malformed = CappedWarnings::new(subject);
    for tag in tags {
        let token = match parse_guest_tag(tag) {
            TagParse::NotOurs => continue,
            TagParse::Malformed(why) => {
                malformed.push(format!("tag `{tag}` {why}; ignored"));
                continue;
            }
            TagParse::Token(t) => t,
        };
        match token {
            GuestToken::Affinity { group: name, hard } => {
                out.groups.extend(group(&name, GroupKind::Affinity, hard));
            }
            GuestToken::AntiAffinity { group: name, hard } => {
                out.groups
                    .extend(group(&name, GroupKind::AntiAffinity, hard));
            }
            GuestToken::Node(n) => node_names.push(n),
            GuestToken::Pin(n) => pin_names.push(n),
            GuestToken::PreferNode(n) => prefer_names.push(n),
            GuestToken::Select(l) => {
                if selectors.insert(l.clone()) {
                    out.selectors.push(l);
                }
            }
            GuestToken::Tolerate(t) => {
                tolerations.insert(t);
            }
            GuestToken::Ignore => out.ignore = true,
            // The age of a `flxp.creating` marker, which warns on its own.
            GuestToken::CreatingSince(_) => {}
            GuestToken::Creating => warnings.push(Warning::about(
                subject,
                "carries flxp.creating: flxp is creating it, or a creation was interrupted (then \
                 finish or remove this VM by hand)",
            )),
        }
    }
    malformed.finish("malformed or unknown flxp tags, ignored", warnings);
    out.tolerations = tolerations.into_iter().collect();
    for (rule, names) in [("flxp.node", node_names), ("plb_pin", pin_names)] {
        if names.is_empty() {
            continue;
        }
        let nodes = resolve_nodes(cluster, warnings, subject, rule, &names);
        out.node_rules.push(NodeRule {
            rule: rule.to_owned(),
            nodes,
        });
    }
    if !prefer_names.is_empty() {
        let nodes = resolve_nodes(
            cluster,
            warnings,
            subject,
            "flxp.prefer-node",
            &prefer_names,
        );
        if !nodes.is_empty() {
            out.preferences.push(Preference {
                rule: "flxp.prefer-node".to_owned(),
                priorities: nodes.into_iter().map(|n| (n, 1)).collect(),
                default: 0,
            });
        }
    }
    out
}

/// Node names from tags to indexes; unknown names are warnings (the rule keeps the rest).
fn resolve_nodes(
    cluster: &Cluster,
    warnings: &mut Vec<Warning>,
    subject: &str,
    rule: &str,
    names: &[String],
) -> Vec<NodeIdx> {
    let mut nodes = Vec::new();
    let mut unknown = CappedWarnings::new(subject);
    for name in names {
        match cluster.node_idx_loose(name) {
            Some(n) => nodes.push(n),
            None => unknown.push(format!(
                "{rule} names node `{name}`, which is not in the cluster"
            )),
        }
    }
    unknown.finish(
        &format!("{rule} tags naming nodes not in the cluster"),
        warnings,
    );
    nodes.sort();
    nodes.dedup();
    nodes
}

impl GroupId {
    /// The index as a `usize`.
    pub fn get(self) -> usize {
        self.0 as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::*;

    #[test]
    fn a_guest_with_200000_tags_is_read_up_to_the_limit_with_warnings_summed_up() {
        use crate::constraints::tags::MAX_GUEST_TAGS;
        // 1,000 rule tags that count (in this order), then 100,000 rule tags and 99,000 foreign
        // tags past the limit.
        let mut tags = vec!["flxp.tolerate.gpu".to_owned()];
        tags.extend((0..600).map(|i| format!("flxp.bogus{i}")));
        tags.extend((0..300).map(|i| format!("flxp.anti-affinity.g{i}")));
        tags.extend((0..99).map(|i| format!("flxp.node.nowhere{i}")));
        tags.extend((0..100_000).map(|i| format!("flxp.anti-affinity.late{i}")));
        tags.extend((0..99_000).map(|i| format!("t{i}")));
        assert_eq!(tags.len(), 200_000);
        let c = ClusterBuilder::new()
            .nodes(&["pve1", "pve2"])
            .guest(vm(101, "pve1").tagged(&tags.join(";")))
            .build();
        let limit: Vec<String> = c.warnings.iter().map(ToString::to_string).collect();
        assert_eq!(
            limit,
            [format!(
                "resources[2] (qemu/101): has more than {MAX_GUEST_TAGS} distinct tags; flxp reads \
                 {MAX_GUEST_TAGS} of them (flxp and ProxLB tags first) and ignores the other 199000 \
                 entries"
            )]
        );
        assert_eq!(
            c.guest(c.guest_idx(101).unwrap()).tags.len(),
            MAX_GUEST_TAGS
        );

        let r = Rules::compile(&c);
        let g = r.guest(c.guest_idx(101).unwrap());
        assert_eq!(r.groups.len(), 300);
        assert_eq!(g.groups.len(), 300);
        assert_eq!(g.tolerations, ["gpu"]);
        assert_eq!(g.node_rules.len(), 1);
        assert!(g.node_rules[0].nodes.is_empty());
        let w: Vec<String> = r.warnings.iter().map(ToString::to_string).collect();
        assert_eq!(w.len(), 22, "{w:#?}");
        assert_eq!(
            w[0],
            "qemu 101 (qemu101): tag `flxp.bogus0` is not a known flxp tag (affinity, anti-affinity, \
             prefer-affinity, prefer-anti-affinity, node, prefer-node, select, tolerate, ignore); ignored"
        );
        assert_eq!(
            w[10],
            "qemu 101 (qemu101): 590 more malformed or unknown flxp tags, ignored (not listed)"
        );
        assert_eq!(
            w[11],
            "qemu 101 (qemu101): flxp.node names node `nowhere0`, which is not in the cluster"
        );
        assert_eq!(
            w[21],
            "qemu 101 (qemu101): 89 more flxp.node tags naming nodes not in the cluster (not listed)"
        );
        assert_eq!(r.conflicts.len(), 1, "{:?}", r.conflicts);
    }

    #[test]
    fn tags_compile_into_node_rules_groups_and_preferences() {
        let c = ClusterBuilder::new()
            .nodes(&["pve1", "pve2", "pve3"])
            .guest(
                vm(101, "pve1")
                    .tagged("flxp.node.pve1;flxp.node.PVE2;flxp.select.ssd;flxp.tolerate.gpu"),
            )
            .guest(
                vm(102, "pve2").tagged("flxp.anti-affinity.web;flxp.prefer-node.pve3;plb_pin_pve2"),
            )
            .guest(vm(103, "pve3").tagged("flxp.anti-affinity.web;flxp.ignore;flxp.node.nowhere"))
            .build();
        let r = Rules::compile(&c);
        let g101 = r.guest(c.guest_idx(101).unwrap());
        assert_eq!(g101.node_rules.len(), 1);
        assert_eq!(g101.node_rules[0].nodes, vec![NodeIdx(0), NodeIdx(1)]);
        assert_eq!(g101.selectors, vec!["ssd"]);
        assert_eq!(g101.tolerations, vec!["gpu"]);
        let g102 = r.guest(c.guest_idx(102).unwrap());
        assert_eq!(g102.node_rules[0].rule, "plb_pin");
        assert_eq!(g102.preferences[0].priority(NodeIdx(2)), 1);
        let web = r.group_id("flxp.anti-affinity.web").unwrap();
        assert_eq!(r.group(web).members.len(), 2);
        assert_eq!(r.group(web).kind, GroupKind::AntiAffinity);
        let g103 = r.guest(c.guest_idx(103).unwrap());
        assert!(g103.ignore);
        assert!(g103.node_rules[0].nodes.is_empty());
        assert!(
            r.warnings
                .iter()
                .any(|w| w.to_string().contains("`nowhere`"))
        );
        assert!(
            r.conflicts
                .iter()
                .any(|c| c.rules.contains(&"flxp.node".to_owned())),
            "{:?}",
            r.conflicts
        );
    }

    #[test]
    fn a_vm_marked_as_being_created_is_pointed_out_and_not_a_rule() {
        let c = ClusterBuilder::new()
            .nodes(&["a"])
            .guest(vm(114, "a").stopped().tagged("flxp.creating"))
            .build();
        let r = Rules::compile(&c);
        let w: Vec<String> = r.warnings.iter().map(ToString::to_string).collect();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("carries flxp.creating"), "{w:?}");
        assert!(!w[0].contains("ignored"), "{w:?}");
        let g = r.guest(c.guest_idx(114).unwrap());
        assert!(g.node_rules.is_empty() && g.groups.is_empty() && !g.ignore);
    }

    #[test]
    fn a_request_joins_existing_groups_only() {
        let c = ClusterBuilder::new()
            .nodes(&["pve1", "pve2"])
            .guest(vm(101, "pve1").tagged("flxp.anti-affinity.web"))
            .build();
        let r = Rules::compile(&c);
        let (req, warnings) = r.compile_request(
            &c,
            &[
                "flxp.anti-affinity.web".into(),
                "flxp.affinity.new".into(),
                "flxp.bogus".into(),
            ],
        );
        assert_eq!(
            req.groups,
            vec![r.group_id("flxp.anti-affinity.web").unwrap()]
        );
        assert_eq!(warnings.len(), 1);
        assert_eq!(
            r.groups.len(),
            1,
            "the request does not change the compiled rules"
        );
    }
}
