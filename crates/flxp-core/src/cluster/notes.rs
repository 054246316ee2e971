//! Node notes tokens (Contract 2): labels, taints, soft taints and maintenance.
//!
//! Notes are free text, rendered by Proxmox as Markdown; only tokens starting with `flxp.` (any
//! case) are read. Tokens are separated by white space or commas, and may sit in prose or Markdown
//! (`(flxp.label.ssd)`, `` `flxp.taint.gpu` ``, `**flxp.maintenance**`, `Labels:flxp.label.nvme`);
//! a struck-through token (`~~flxp.maintenance~~`) is a retired one and is not read. A malformed
//! or unknown `flxp.` token is a warning, never a rule.

use std::collections::BTreeSet;

use super::tags::is_valid_tag_text;
use crate::warning::{CappedWarnings, Warning};

/// What a node's notes say.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeTokens {
    /// `flxp.label.<label>`.
    pub labels: BTreeSet<String>,
    /// `flxp.taint.<taint>`.
    pub taints: BTreeSet<String>,
    /// `flxp.prefer-no.<taint>`.
    pub prefer_no: BTreeSet<String>,
    /// `flxp.maintenance`.
    pub maintenance: bool,
    /// Malformed or unknown `flxp.` tokens.
    pub warnings: Vec<Warning>,
}

/// How many `flxp.` tokens flxp reads from one node's notes; the rest are ignored with one
/// warning. Notes are free text of any length, and a real node needs a handful of tokens.
pub const MAX_NODE_TOKENS: usize = 1000;

/// Reads the `flxp.` tokens of one node's notes.
pub fn parse(node: &str, text: &str) -> NodeTokens {
    let mut out = NodeTokens::default();
    let text = without_struck_spans(text);
    let mut bad = CappedWarnings::new(format!("node {node}"));
    let (mut read, mut skipped) = (0usize, 0usize);
    for raw in text.split(|c: char| c == ',' || c.is_whitespace()) {
        let Some(token) = token_in(raw) else {
            continue;
        };
        let token = token.to_ascii_lowercase();
        // Trimming a full stop may leave the bare word `flxp` ("... see flxp."): prose, not a token.
        let Some(rest) = token.strip_prefix("flxp.") else {
            continue;
        };
        if read == MAX_NODE_TOKENS {
            skipped += 1;
            continue;
        }
        read += 1;
        let (kind, arg) = match rest.split_once('.') {
            Some((k, a)) => (k, Some(a)),
            None => (rest, None),
        };
        let mut warn = |why: &str| bad.push(format!("notes token `{token}` {why}; ignored"));
        match (kind, arg) {
            ("maintenance", None) => out.maintenance = true,
            ("label" | "taint" | "prefer-no", Some(a)) if is_valid_tag_text(a) => {
                let set = match kind {
                    "label" => &mut out.labels,
                    "taint" => &mut out.taints,
                    _ => &mut out.prefer_no,
                };
                set.insert(a.to_owned());
            }
            ("label" | "taint" | "prefer-no", Some(a)) if !a.is_empty() => warn(
                "has a name Proxmox tags cannot hold (letters, digits and _ + . - only, not starting with + . -)",
            ),
            ("label" | "taint" | "prefer-no", _) => warn("needs a name after the kind"),
            ("maintenance", Some(_)) => warn("takes no argument"),
            (
                "affinity"
                | "anti-affinity"
                | "prefer-affinity"
                | "prefer-anti-affinity"
                | "node"
                | "prefer-node"
                | "select"
                | "tolerate"
                | "ignore",
                _,
            ) => warn("is a guest tag, not a node token"),
            _ => warn("is not a known flxp node token (label, taint, prefer-no, maintenance)"),
        }
    }
    bad.finish(
        "malformed or unknown notes tokens, ignored",
        &mut out.warnings,
    );
    if skipped > 0 {
        out.warnings.push(Warning::node(
            node,
            format!(
                "notes hold {} flxp tokens; flxp reads the first {MAX_NODE_TOKENS} and ignores the other {skipped}",
                read + skipped
            ),
        ));
    }
    out
}

/// Prose and Markdown around a token: it starts after one of these and ends before one.
fn is_markup(c: char) -> bool {
    matches!(
        c,
        '`' | '*'
            | '['
            | ']'
            | '('
            | ')'
            | '<'
            | '>'
            | '{'
            | '}'
            | '"'
            | '\''
            | ';'
            | ':'
            | '='
            | '!'
            | '?'
            | '|'
            | '~'
            | '#'
            | '_'
    )
}

/// The text without its struck-through spans (`~~...~~`, and GitHub's `~...~` with no blank just
/// inside the tildes), line by line: tokens in them are ones the admin has retired.
fn without_struck_spans(text: &str) -> String {
    text.lines()
        .map(|line| {
            let line = cut_spans(line, "~~", |_| true);
            cut_spans(&line, "~", |inner| {
                !inner.is_empty()
                    && !inner.starts_with(char::is_whitespace)
                    && !inner.ends_with(char::is_whitespace)
            })
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `line` with every `mark`...`mark` span whose inside passes `struck` replaced by a blank.
fn cut_spans(line: &str, mark: &str, struck: impl Fn(&str) -> bool) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(open) = rest.find(mark) {
        let after = &rest[open + mark.len()..];
        match after.find(mark) {
            Some(close) if struck(&after[..close]) => {
                out.push_str(&rest[..open]);
                out.push(' ');
                rest = &after[close + mark.len()..];
            }
            _ => {
                out.push_str(&rest[..open + mark.len()]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The `flxp.` token within one white-space-separated word, without the prose around it.
fn token_in(word: &str) -> Option<&str> {
    // ASCII lowercasing keeps byte offsets, so positions found in `lower` index `word`.
    let lower = word.to_ascii_lowercase();
    let start = lower.match_indices("flxp.").map(|(i, _)| i).find(|&i| {
        word[..i]
            .chars()
            .next_back()
            .is_none_or(|c| is_markup(c) || c == '.' || c == '-')
    })?;
    let token = &word[start..];
    let end = token
        .char_indices()
        .find(|&(_, c)| is_markup(c) && c != '_')
        .map_or(token.len(), |(i, _)| i);
    // A sentence's full stop and Markdown's `_emphasis_` are not part of the token.
    Some(token[..end].trim_end_matches(['.', '_']))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_read_from_prose_separated_by_spaces_or_commas() {
        let t = parse(
            "pve1",
            "Rack 4 (flxp.label.ssd), FLXP.Taint.GPU flxp.prefer-no.batch\nflxp.maintenance.",
        );
        assert_eq!(t.labels, BTreeSet::from(["ssd".to_owned()]));
        assert_eq!(t.taints, BTreeSet::from(["gpu".to_owned()]));
        assert_eq!(t.prefer_no, BTreeSet::from(["batch".to_owned()]));
        assert!(t.maintenance);
        assert!(t.warnings.is_empty(), "{:?}", t.warnings);
    }

    #[test]
    fn notes_with_200000_tokens_are_read_up_to_the_limit_with_warnings_summed_up() {
        let mut text: Vec<String> = (0..500).map(|i| format!("flxp.label.l{i}")).collect();
        text.extend((0..500).map(|i| format!("flxp.bogus{i}")));
        text.extend((0..199_000).map(|i| format!("flxp.taint.t{i}")));
        let t = parse("pve1", &text.join(" "));
        assert_eq!(t.labels.len(), 500);
        assert!(t.taints.is_empty());
        let w: Vec<String> = t.warnings.iter().map(ToString::to_string).collect();
        assert_eq!(w.len(), 12, "{w:#?}");
        assert_eq!(
            w[0],
            "node pve1: notes token `flxp.bogus0` is not a known flxp node token (label, taint, \
             prefer-no, maintenance); ignored"
        );
        assert_eq!(
            w[10],
            "node pve1: 490 more malformed or unknown notes tokens, ignored (not listed)"
        );
        assert_eq!(
            w[11],
            format!(
                "node pve1: notes hold 200000 flxp tokens; flxp reads the first {MAX_NODE_TOKENS} \
                 and ignores the other 199000"
            )
        );
    }

    #[test]
    fn the_lease_comment_line_is_no_token_and_no_warning() {
        // flxp's zone lease (engine `lease` module) lives in the lease node's notes.
        let t = parse(
            "pve1",
            "flxp.label.ssd\n<!-- flxp-lease zone=lab holder=host-1.example:4242:9f3a expires=1764400030 -->",
        );
        assert_eq!(t.labels, BTreeSet::from(["ssd".to_owned()]));
        assert!(!t.maintenance && t.taints.is_empty() && t.prefer_no.is_empty());
        assert!(t.warnings.is_empty(), "{:?}", t.warnings);
    }

    #[test]
    fn tokens_are_read_from_markdown() {
        let t = parse(
            "pve1",
            "- `flxp.label.ssd`\n- **flxp.taint.gpu**\nLabels:flxp.label.nvme _flxp.prefer-no.batch_ [flxp.label.fast_io](https://x) <flxp.maintenance>",
        );
        assert_eq!(
            t.labels,
            BTreeSet::from(["fast_io".to_owned(), "nvme".to_owned(), "ssd".to_owned()])
        );
        assert_eq!(t.taints, BTreeSet::from(["gpu".to_owned()]));
        assert_eq!(t.prefer_no, BTreeSet::from(["batch".to_owned()]));
        assert!(t.maintenance);
        assert!(t.warnings.is_empty(), "{:?}", t.warnings);
        // Struck-through tokens are retired ones, wherever they sit in the struck span.
        for text in [
            "~~flxp.maintenance~~ ~~flxp.taint.gpu~~",
            "~~was in flxp.maintenance until monday~~",
            "~flxp.maintenance~",
            "~~`flxp.maintenance`~~",
            "~~flxp.maintenance, flxp.taint.gpu~~",
        ] {
            let t = parse("pve1", text);
            assert!(
                !t.maintenance && t.taints.is_empty() && t.warnings.is_empty(),
                "{text}: {t:?}"
            );
        }
        // A lone tilde is prose ("~5 GB"), and a struck span ends at its line.
        let t = parse(
            "pve1",
            "about ~5 GB, flxp.taint.gpu\n~~old~~ flxp.maintenance",
        );
        assert!(t.maintenance && t.taints.contains("gpu"), "{t:?}");
        // Words that merely contain the prefix are not tokens.
        let t = parse("pve1", "noflxp.label.x myflxp.taint.y");
        assert!(t.labels.is_empty() && t.taints.is_empty() && t.warnings.is_empty());
    }

    #[test]
    fn a_bare_prefix_is_prose_not_a_panic() {
        // Found by `scripts/fuzz.sh tokens`: `flxp.` followed by markup trimmed to `flxp`.
        let text = "flxp.affinity.d\u{1}\u{0}\u{11}\u{0}b,flxp.`flxp.l\u{1}\u{0}\u{11}\u{0}abel.nvme` ~~Alxp.more_x";
        let t = parse("pve1", text);
        assert!(t.labels.is_empty() && !t.maintenance, "{t:?}");
        for text in ["flxp.", "see flxp.", "flxp._", "`flxp.`", "flxp.__."] {
            let t = parse("pve1", text);
            assert!(t.warnings.is_empty(), "{text}: {t:?}");
        }
        for piece in text.split([';', ',', ' ']) {
            let _ = super::super::tags::parse_guest_tag(&piece.to_ascii_lowercase());
        }
    }

    #[test]
    fn a_name_proxmox_tags_cannot_hold_is_named_as_such() {
        let t = parse("pve1", "flxp.label.\u{fc}ber");
        let w: Vec<String> = t.warnings.iter().map(ToString::to_string).collect();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("has a name Proxmox tags cannot hold"),
            "{w:?}"
        );
    }

    #[test]
    fn malformed_and_unknown_tokens_become_warnings() {
        let t = parse(
            "pve1",
            "flxp.label flxp.taint. flxp.lable.ssd flxp.node.pve2 flxp.maintenance.now",
        );
        assert!(t.labels.is_empty() && t.taints.is_empty() && !t.maintenance);
        let w: Vec<String> = t.warnings.iter().map(ToString::to_string).collect();
        assert_eq!(w.len(), 5, "{w:?}");
        assert!(w[0].contains("`flxp.label` needs a name"), "{w:?}");
        assert!(w[2].contains("not a known flxp node token"), "{w:?}");
        assert!(w[3].contains("guest tag"), "{w:?}");
        assert!(w[4].contains("takes no argument"), "{w:?}");
    }
}
