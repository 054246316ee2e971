//! Proxmox tag lists: splitting, the `pve-tag` character rule, and the normalised stored form.
//!
//! Validation of request parameters happens in the schema check (format `pve-tag-list`); this
//! module holds the rules that check and the normalisation the config writer applies afterwards.

/// Splits a Proxmox list value: on NUL when present, else on `,`, `;` and white space
/// (`PVE::Tools::split_list`). Empty items are dropped.
pub fn split_list(text: &str) -> Vec<&str> {
    if text.contains('\0') {
        return text.split('\0').filter(|s| !s.is_empty()).collect();
    }
    text.split(|c: char| c == ',' || c == ';' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Whether one tag matches `^[a-z0-9_][a-z0-9_\-+.]*$` (case-insensitive), Proxmox's `pve-tag`.
pub fn is_valid_tag(tag: &str) -> bool {
    let mut chars = tag.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    (first.is_ascii_alphanumeric() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '+' | '.'))
}

/// How the datacenter's `tag-style` asks tags to be stored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TagStyle {
    /// `case-sensitive=1`: keep the case as written.
    pub case_sensitive: bool,
    /// `ordering=config`: keep the order as written instead of sorting.
    pub keep_order: bool,
}

impl TagStyle {
    /// Reads the `tag-style` property string of `/cluster/options` (unknown keys are ignored).
    pub fn parse(value: &str) -> Self {
        let mut style = TagStyle::default();
        for part in value.split(',') {
            match part.split_once('=') {
                Some(("case-sensitive", v)) => style.case_sensitive = matches!(v, "1" | "true"),
                Some(("ordering", v)) => style.keep_order = v == "config",
                _ => {}
            }
        }
        style
    }
}

/// Normalises a tag list as Proxmox stores it: deduplicated, lowercased and sorted (unless the
/// tag style says otherwise), joined with `;`. Assumes every tag passed [`is_valid_tag`].
pub fn normalize(text: &str, style: TagStyle) -> String {
    let mut out: Vec<String> = Vec::new();
    for tag in split_list(text) {
        let tag = if style.case_sensitive {
            tag.to_string()
        } else {
            tag.to_ascii_lowercase()
        };
        if !out.contains(&tag) {
            out.push(tag);
        }
    }
    if !style.keep_order {
        out.sort();
    }
    out.join(";")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_follow_the_pve_tag_rule() {
        for ok in ["flxp.affinity.web", "_x", "a+b-c.d", "9", "Prod"] {
            assert!(is_valid_tag(ok), "{ok}");
        }
        for bad in [
            "flxp/affinity=web",
            "-x",
            ".x",
            "a:b",
            "a b",
            "a@b",
            "",
            "ä",
        ] {
            assert!(!is_valid_tag(bad), "{bad}");
        }
    }

    #[test]
    fn lists_are_lowercased_sorted_and_deduplicated() {
        assert_eq!(
            normalize("Web;db, web flxp.ignore", TagStyle::default()),
            "db;flxp.ignore;web"
        );
        assert_eq!(normalize("", TagStyle::default()), "");
        let keep = TagStyle::parse("case-sensitive=1,ordering=config");
        assert_eq!(normalize("b;A;b", keep), "b;A");
        assert_eq!(split_list("a\0b,c"), vec!["a", "b,c"]);
    }
}
