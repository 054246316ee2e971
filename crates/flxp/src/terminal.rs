//! Text from the cluster made safe for a terminal: node names, tags, notes and Proxmox's error
//! texts can hold control characters (an ESC sequence recolours or rewrites the screen, a newline
//! splits a table row, a bidi override reorders what is read). They are shown escaped instead.
//!
//! `--json` output is not touched: JSON escapes control characters itself.

use std::borrow::Cow;

/// Whether a character must not reach a terminal as it is.
fn is_unsafe(c: char) -> bool {
    c.is_control()
        // Bidirectional overrides and isolates: they reorder the text around them.
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every unsafe character but line breaks and tabs escaped (`\u{1b}`), for whole
/// lines and multi-line blocks (a rendered table keeps its rows).
pub fn lines(text: &str) -> Cow<'_, str> {
    escape(text, |c| c != '\n' && c != '\t' && is_unsafe(c))
}

/// `text` with every unsafe character escaped, line breaks too, for one table cell or one value.
pub fn cell(text: &str) -> Cow<'_, str> {
    escape(text, is_unsafe)
}

fn escape(text: &str, unsafe_char: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(&unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if unsafe_char(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_and_line_breaks_in_a_cell_are_shown_escaped() {
        assert_eq!(cell("pve\u{1b}[31m1"), "pve\\u{1b}[31m1");
        assert_eq!(cell("a\nb\rc"), "a\\u{a}b\\u{d}c");
        assert_eq!(cell("evil\u{202e}gnp.exe"), "evil\\u{202e}gnp.exe");
        assert_eq!(cell("plain-name.example"), "plain-name.example");
        assert!(matches!(cell("plain"), Cow::Borrowed(_)));
    }

    #[test]
    fn whole_lines_keep_their_breaks_and_tabs() {
        assert_eq!(lines("row 1\n\trow\u{7} 2"), "row 1\n\trow\\u{7} 2");
        assert_eq!(lines("über ✓"), "über ✓");
    }
}
