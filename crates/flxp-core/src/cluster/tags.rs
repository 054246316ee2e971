//! Guest tags (Contract 2): flxp's own `flxp.` tags and ProxLB's `plb_` tags, read one at a time.
//!
//! A tag is ours, someone else's (ignored), or ours but malformed (a warning). The shape is
//! `flxp.<kind>[.<argument>]`; the argument is everything after the second dot.

use std::collections::HashSet;

/// How many distinct tags flxp reads per guest; the rest are ignored with one warning.
///
/// Proxmox sets no limit (pve-common `PVE::JSONSchema`'s `pve-tag-list` format has no count or
/// length bound), so anyone allowed to edit a guest's tags could hand every plan millions of them.
/// Real guests carry a handful; a thousand is far beyond any rule set and keeps every decision's
/// cost bounded.
pub const MAX_GUEST_TAGS: usize = 1000;

/// Whether a tag is read as a rule (flxp's `flxp.` or ProxLB's `plb_`), not someone else's.
pub fn is_rule_tag(tag: &str) -> bool {
    tag.starts_with("flxp.") || tag.starts_with("plb_")
}

/// A guest's tag list as flxp reads it: at most [`MAX_GUEST_TAGS`] distinct tags, lowercased,
/// in their order, rule tags first in line (so that other tools' tags never push a rule out).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GuestTags {
    /// The tags read.
    pub tags: Vec<String>,
    /// Entries of the list past the limit, not read (repeats among them counted each time).
    pub over: usize,
}

/// Reads a Proxmox tag list (`;`, `,` or white space) within [`MAX_GUEST_TAGS`]; `invalid` is
/// told each entry with characters Proxmox does not allow (not read, not counted).
///
/// Linear, and past the limit cheap: only the tags kept are hashed into the set of those seen,
/// so a list of millions costs a scan, not a table of millions.
pub fn read_guest_tags(list: &str, invalid: &mut dyn FnMut(&str)) -> GuestTags {
    let pieces = || {
        list.split(|c: char| c == ';' || c == ',' || c.is_whitespace())
            .filter(|t| !t.is_empty())
    };
    let is_rule = |t: &str| {
        t.get(..5).is_some_and(|p| p.eq_ignore_ascii_case("flxp."))
            || t.get(..4).is_some_and(|p| p.eq_ignore_ascii_case("plb_"))
    };
    let mut seen: HashSet<String> = HashSet::new();
    let mut kept: Vec<(usize, String)> = Vec::new();
    let mut over = 0;
    let mut buf = String::new();
    // Rule tags first, then the others into what room is left.
    for rules in [true, false] {
        for (i, t) in pieces().enumerate() {
            if is_rule(t) != rules {
                continue;
            }
            if !is_valid_tag_text(t) {
                continue;
            }
            buf.clear();
            buf.push_str(t);
            buf.make_ascii_lowercase();
            if seen.contains(buf.as_str()) {
                continue;
            }
            if seen.len() == MAX_GUEST_TAGS {
                over += 1;
                continue;
            }
            seen.insert(buf.clone());
            kept.push((i, buf.clone()));
        }
    }
    for t in pieces().filter(|t| !is_valid_tag_text(t)) {
        invalid(t);
    }
    kept.sort_by_key(|(i, _)| *i);
    GuestTags {
        tags: kept.into_iter().map(|(_, t)| t).collect(),
        over,
    }
}

/// The tag of a VM flxp is creating ([`GuestToken::Creating`]).
pub const CREATING_TAG: &str = "flxp.creating";

/// A rule read from one guest tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuestToken {
    /// `flxp.affinity.<g>` / `flxp.prefer-affinity.<g>` / `plb_affinity_<x>`: keep the group together.
    Affinity {
        /// Group name: the tag itself, so that explanations name what the user wrote.
        group: String,
        /// Hard (must) or soft (prefer).
        hard: bool,
    },
    /// `flxp.anti-affinity.<g>` / `flxp.prefer-anti-affinity.<g>` / `plb_anti_affinity_<x>`.
    AntiAffinity {
        /// Group name: the tag itself.
        group: String,
        /// Hard (must) or soft (prefer).
        hard: bool,
    },
    /// `flxp.node.<node>`: only on the named nodes (several tags: any of them).
    Node(String),
    /// `plb_pin_<node>`: ProxLB's pin, a separate any-of set.
    Pin(String),
    /// `flxp.prefer-node.<node>`.
    PreferNode(String),
    /// `flxp.select.<label>`: only on nodes with the label (several: all of them).
    Select(String),
    /// `flxp.tolerate.<taint>`.
    Tolerate(String),
    /// `flxp.ignore` / `plb_ignore...`: never moved by the rebalancer.
    Ignore,
    /// `flxp.creating`: flxp put it on a VM it is creating and takes it off when the VM is done;
    /// one left behind marks a creation that was interrupted.
    Creating,
    /// `flxp.creating-since.<epoch>`: when flxp marked the VM `flxp.creating` (epoch seconds),
    /// so that any flxp can tell a stale marker from a creation in progress.
    CreatingSince(i64),
}

/// The outcome of reading one tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TagParse {
    /// A rule.
    Token(GuestToken),
    /// Not a flxp or ProxLB tag.
    NotOurs,
    /// A `flxp.` tag that means nothing; the text says why.
    Malformed(String),
}

/// Whether text is allowed in a Proxmox tag (`[a-z0-9_][a-z0-9_+.-]*`, case-insensitive).
pub fn is_valid_tag_text(s: &str) -> bool {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphanumeric() || c == '_' => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '+' | '.' | '-'))
}

/// Reads one guest tag (already lowercased).
pub fn parse_guest_tag(tag: &str) -> TagParse {
    if let Some(rest) = tag.strip_prefix("flxp.") {
        return parse_flxp(tag, rest);
    }
    if let Some(rest) = tag.strip_prefix("plb_") {
        return parse_proxlb(tag, rest);
    }
    TagParse::NotOurs
}

fn parse_flxp(tag: &str, rest: &str) -> TagParse {
    if !is_valid_tag_text(tag) {
        return TagParse::Malformed("has characters Proxmox does not allow in tags".into());
    }
    let (kind, arg) = match rest.split_once('.') {
        Some((k, a)) => (k, Some(a)),
        None => (rest, None),
    };
    let need = |arg: Option<&str>, what: &str| -> Result<String, TagParse> {
        match arg {
            Some(a) if !a.is_empty() && !a.starts_with('.') && !a.ends_with('.') => {
                Ok(a.to_owned())
            }
            _ => Err(TagParse::Malformed(format!(
                "needs {what} after `flxp.{kind}.`"
            ))),
        }
    };
    let token = match kind {
        "ignore" => match arg {
            None => Ok(GuestToken::Ignore),
            Some(_) => Err(TagParse::Malformed("takes no argument".into())),
        },
        "creating" if arg.is_none() => Ok(GuestToken::Creating),
        "creating-since" => match arg.and_then(|a| a.parse::<i64>().ok()) {
            Some(t) if t >= 0 => Ok(GuestToken::CreatingSince(t)),
            _ => Err(TagParse::Malformed(
                "needs the epoch seconds after `flxp.creating-since.`".into(),
            )),
        },
        "affinity" | "prefer-affinity" => need(arg, "a group name").map(|_| GuestToken::Affinity {
            group: tag.to_owned(),
            hard: kind == "affinity",
        }),
        "anti-affinity" | "prefer-anti-affinity" => {
            need(arg, "a group name").map(|_| GuestToken::AntiAffinity {
                group: tag.to_owned(),
                hard: kind == "anti-affinity",
            })
        }
        "node" => need(arg, "a node name").map(GuestToken::Node),
        "prefer-node" => need(arg, "a node name").map(GuestToken::PreferNode),
        "select" => need(arg, "a label").map(GuestToken::Select),
        "tolerate" => need(arg, "a taint").map(GuestToken::Tolerate),
        "label" | "taint" | "prefer-no" | "maintenance" => Err(TagParse::Malformed(
            "is a node token; put it in the node's notes".into(),
        )),
        _ => Err(TagParse::Malformed(
            "is not a known flxp tag (affinity, anti-affinity, prefer-affinity, prefer-anti-affinity, \
             node, prefer-node, select, tolerate, ignore)"
                .into(),
        )),
    };
    match token {
        Ok(t) => TagParse::Token(t),
        Err(e) => e,
    }
}

fn parse_proxlb(tag: &str, rest: &str) -> TagParse {
    // ProxLB matches by prefix and uses the whole tag as the group name.
    let names_group = |prefix: &str| rest.strip_prefix(prefix).is_some_and(|g| !g.is_empty());
    let (group, hard) = (tag.to_owned(), true);
    if rest.starts_with("ignore") {
        TagParse::Token(GuestToken::Ignore)
    } else if names_group("anti_affinity_") {
        TagParse::Token(GuestToken::AntiAffinity { group, hard })
    } else if names_group("affinity_") {
        TagParse::Token(GuestToken::Affinity { group, hard })
    } else if let Some(node) = rest.strip_prefix("pin_").filter(|n| !n.is_empty()) {
        TagParse::Token(GuestToken::Pin(node.to_owned()))
    } else {
        TagParse::NotOurs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tok(t: &str) -> GuestToken {
        match parse_guest_tag(t) {
            TagParse::Token(t) => t,
            other => panic!("{t}: {other:?}"),
        }
    }

    #[test]
    fn every_flxp_tag_kind_is_read() {
        assert_eq!(
            tok("flxp.affinity.web"),
            GuestToken::Affinity {
                group: "flxp.affinity.web".into(),
                hard: true
            }
        );
        assert_eq!(
            tok("flxp.prefer-affinity.web"),
            GuestToken::Affinity {
                group: "flxp.prefer-affinity.web".into(),
                hard: false
            }
        );
        assert_eq!(
            tok("flxp.anti-affinity.db"),
            GuestToken::AntiAffinity {
                group: "flxp.anti-affinity.db".into(),
                hard: true
            }
        );
        assert_eq!(
            tok("flxp.prefer-anti-affinity.db"),
            GuestToken::AntiAffinity {
                group: "flxp.prefer-anti-affinity.db".into(),
                hard: false
            }
        );
        assert_eq!(tok("flxp.node.pve1"), GuestToken::Node("pve1".into()));
        assert_eq!(
            tok("flxp.prefer-node.pve2"),
            GuestToken::PreferNode("pve2".into())
        );
        assert_eq!(tok("flxp.select.ssd"), GuestToken::Select("ssd".into()));
        assert_eq!(
            tok("flxp.select.zone.eu-1"),
            GuestToken::Select("zone.eu-1".into())
        );
        assert_eq!(tok("flxp.tolerate.gpu"), GuestToken::Tolerate("gpu".into()));
        assert_eq!(tok("flxp.ignore"), GuestToken::Ignore);
        assert_eq!(tok("flxp.creating"), GuestToken::Creating);
        assert_eq!(
            tok("flxp.creating-since.1764400000"),
            GuestToken::CreatingSince(1_764_400_000)
        );
    }

    #[test]
    fn proxlb_tags_are_read_with_the_whole_tag_as_group() {
        assert_eq!(
            tok("plb_affinity_web"),
            GuestToken::Affinity {
                group: "plb_affinity_web".into(),
                hard: true
            }
        );
        assert_eq!(
            tok("plb_anti_affinity_db"),
            GuestToken::AntiAffinity {
                group: "plb_anti_affinity_db".into(),
                hard: true
            }
        );
        assert_eq!(tok("plb_ignore"), GuestToken::Ignore);
        assert_eq!(tok("plb_ignore_vm"), GuestToken::Ignore);
        assert_eq!(tok("plb_pin_pve3"), GuestToken::Pin("pve3".into()));
        assert_eq!(parse_guest_tag("plb_other"), TagParse::NotOurs);
    }

    #[test]
    fn past_the_limit_rule_tags_are_kept_before_other_tags() {
        let mut list: Vec<String> = (0..MAX_GUEST_TAGS + 500).map(|i| format!("a{i}")).collect();
        list.push("FLXP.Anti-Affinity.db".into());
        list.push("plb_pin_pve1".into());
        list.push("a0".into());
        list.push("bad/tag".into());
        let mut bad = Vec::new();
        let read = read_guest_tags(&list.join(";"), &mut |t| bad.push(t.to_owned()));
        assert_eq!(read.over, 502);
        assert_eq!(read.tags.len(), MAX_GUEST_TAGS);
        assert_eq!(read.tags[0], "a0");
        assert_eq!(
            read.tags[MAX_GUEST_TAGS - 3],
            format!("a{}", MAX_GUEST_TAGS - 3)
        );
        assert_eq!(
            read.tags[MAX_GUEST_TAGS - 2..],
            ["flxp.anti-affinity.db", "plb_pin_pve1"]
        );
        assert_eq!(bad, ["bad/tag"]);

        let few = read_guest_tags("b;a,B a", &mut |_| {});
        assert_eq!(
            few,
            GuestTags {
                tags: vec!["b".into(), "a".into()],
                over: 0
            }
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Within the limit, reading a list is splitting it (lowercase, no repeats) and dropping
        /// what Proxmox would refuse.
        #[test]
        fn within_the_limit_reading_is_splitting_without_invalid_tags(
            list in "[a-zA-Z0-9_.+/;, -]{0,200}"
        ) {
            let read = read_guest_tags(&list, &mut |_| {});
            let split: Vec<String> = crate::cluster::split_tags(&list)
                .into_iter()
                .filter(|t| is_valid_tag_text(t))
                .collect();
            proptest::prop_assert_eq!(read.tags, split);
            proptest::prop_assert_eq!(read.over, 0);
        }
    }

    #[test]
    fn foreign_tags_are_not_ours() {
        for t in ["production", "flxp", "flxpx.node.a", "web"] {
            assert_eq!(parse_guest_tag(t), TagParse::NotOurs, "{t}");
        }
    }

    #[test]
    fn malformed_flxp_tags_say_why() {
        for (t, why) in [
            ("flxp.node", "needs a node name"),
            ("flxp.node.", "needs a node name"),
            ("flxp.affinity", "needs a group name"),
            ("flxp.ignore.me", "takes no argument"),
            ("flxp.creating-since.soon", "needs the epoch seconds"),
            ("flxp.afinity.web", "not a known flxp tag"),
            ("flxp.taint.gpu", "node token"),
            ("flxp.node.a/b", "characters"),
        ] {
            match parse_guest_tag(t) {
                TagParse::Malformed(m) => assert!(m.contains(why), "{t}: {m}"),
                other => panic!("{t}: {other:?}"),
            }
        }
    }
}
