//! Finding where a key is in the config text, so that every mistake names its line.

use toml_edit::{ImDocument, Item, TableLike};

/// A 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1.
    pub column: usize,
}

/// The parsed text, kept for lookups.
pub struct Locator {
    doc: Option<ImDocument<String>>,
    text: String,
}

impl Locator {
    /// Parses the text (a text that does not parse locates nothing).
    pub fn new(text: &str) -> Self {
        Self {
            doc: ImDocument::parse(text.to_owned()).ok(),
            text: text.to_owned(),
        }
    }

    /// Where a dotted key path is, or its deepest existing parent (`zones.eu.hosts` → the
    /// `hosts` key, else the `[zones.eu]` header).
    pub fn find(&self, path: &[&str]) -> Option<Place> {
        let doc = self.doc.as_ref()?;
        let mut table: &dyn TableLike = doc.as_table();
        let mut found = None;
        for (i, seg) in path.iter().enumerate() {
            // `plugin[1]`: the second `[[plugin]]` table.
            let (seg, index) = match seg.strip_suffix(']').and_then(|s| s.split_once('[')) {
                Some((name, n)) => (name, n.parse::<usize>().ok()),
                None => (*seg, None),
            };
            let Some((key, item)) = table.get_key_value(seg) else {
                break;
            };
            found = key.span().or(found);
            if let (Item::ArrayOfTables(a), Some(n)) = (item, index) {
                let Some(t) = a.get(n) else { break };
                found = t.span().or(found);
                if i + 1 == path.len() {
                    break;
                }
                table = t;
                continue;
            }
            if i + 1 == path.len() {
                break;
            }
            match item {
                Item::Table(t) => table = t,
                Item::Value(v) => match v.as_inline_table() {
                    Some(t) => table = t,
                    None => break,
                },
                _ => break,
            }
        }
        found.map(|span| self.place(span.start))
    }

    /// The `[[array]]` table a byte offset lies in: its index, its `name` key's value if any, and
    /// the key whose line it is on (the last key starting at or before the offset).
    pub fn entry_at(
        &self,
        array: &str,
        offset: usize,
    ) -> Option<(usize, Option<String>, Option<String>)> {
        let doc = self.doc.as_ref()?;
        let Some(Item::ArrayOfTables(a)) = doc.as_table().get(array) else {
            return None;
        };
        // Entries come in document order: the last one whose header starts before the offset.
        let (index, table) = a
            .iter()
            .enumerate()
            .filter(|(_, t)| t.span().is_some_and(|s| s.start <= offset))
            .last()?;
        let name = table
            .get("name")
            .and_then(|v| v.as_str())
            .map(str::to_owned);
        let key = table
            .iter()
            .filter_map(|(k, _)| {
                let span = table.key(k)?.span()?;
                (span.start <= offset).then_some((span.start, k.to_owned()))
            })
            .max()
            .map(|(_, k)| k);
        Some((index, name, key))
    }

    /// The dotted key whose key or value holds a byte offset (`consolidate.headroom`), when one
    /// does: a type error or an unknown key names the key, not only its line. A text the TOML
    /// parser refuses (a number too large) is read line by line instead.
    pub fn key_at(&self, offset: usize) -> Option<String> {
        fn walk(t: &dyn TableLike, offset: usize, path: &mut Vec<String>) -> bool {
            for (k, item) in t.iter() {
                path.push(k.to_owned());
                let on_key = t
                    .get_key_value(k)
                    .and_then(|(key, _)| key.span())
                    .is_some_and(|s| s.contains(&offset));
                let hit = on_key
                    || match item {
                        Item::Table(sub) => walk(sub, offset, path),
                        Item::Value(v) => {
                            v.as_inline_table().is_some_and(|t| walk(t, offset, path))
                                || v.span().is_some_and(|s| s.contains(&offset))
                        }
                        // `[[name]]`: its header, or a key inside one of its tables.
                        Item::ArrayOfTables(a) => a.iter().any(|t| {
                            t.span().is_some_and(|s| s.contains(&offset)) || walk(t, offset, path)
                        }),
                        Item::None => false,
                    };
                if hit {
                    return true;
                }
                path.pop();
            }
            false
        }
        let Some(doc) = self.doc.as_ref() else {
            return self.key_on_line(offset);
        };
        let mut path = Vec::new();
        walk(doc.as_table(), offset, &mut path).then(|| path.join("."))
    }

    /// Whether a dotted key is an array of tables (`[[consolidate]]`).
    pub fn is_array_of_tables(&self, key: &str) -> bool {
        let Some(doc) = self.doc.as_ref() else {
            return false;
        };
        let mut table: &dyn TableLike = doc.as_table();
        let segments: Vec<&str> = key.split('.').collect();
        for (i, seg) in segments.iter().enumerate() {
            match table.get(seg) {
                Some(Item::ArrayOfTables(_)) => return i + 1 == segments.len(),
                Some(Item::Table(t)) => table = t,
                _ => return false,
            }
        }
        false
    }

    /// The key of a `key = value` line holding the offset, under the last `[table]` header above
    /// it; only bare keys (the parser's own error gives the line anyway).
    fn key_on_line(&self, offset: usize) -> Option<String> {
        let bare = |k: &str| {
            !k.is_empty()
                && k.split('.').all(|p| {
                    !p.is_empty()
                        && p.chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                })
        };
        let mut table = String::new();
        let mut start = 0;
        for line in self.text.split_inclusive('\n') {
            let end = start + line.len();
            let t = line.trim();
            if let Some(h) = t.strip_prefix('[') {
                let h = h.trim_start_matches('[');
                let h = h.split(']').next().unwrap_or_default().trim();
                table = if bare(h) { h.to_owned() } else { String::new() };
            } else if (start..end).contains(&offset) {
                let k = t.split_once('=')?.0.trim();
                return bare(k).then(|| {
                    if table.is_empty() {
                        k.to_owned()
                    } else {
                        format!("{table}.{k}")
                    }
                });
            }
            if (start..end).contains(&offset) {
                return None;
            }
            start = end;
        }
        None
    }

    /// Line and column of a byte offset.
    pub fn place(&self, offset: usize) -> Place {
        let before = &self.text[..offset.min(self.text.len())];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        Place { line, column }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_holding_an_offset_is_named() {
        let text = "[consolidate]\nheadroom = \"yes\"\n";
        let l = Locator::new(text);
        let at = text.find("\"yes").unwrap();
        assert_eq!(l.key_at(at).as_deref(), Some("consolidate.headroom"));
        assert_eq!(l.key_at(0), None);
    }

    #[test]
    fn keys_are_named_on_their_key_and_in_unparsable_text() {
        let text = "[consolidate]\nbogus = 1\n";
        let l = Locator::new(text);
        let at = text.find("bogus").unwrap();
        assert_eq!(l.key_at(at).as_deref(), Some("consolidate.bogus"));
        let text = "[a]\nb = 1\n[consolidate]\nwake-timeout-secs = 99999999999999999999\n";
        let l = Locator::new(text);
        let at = text.find("9999").unwrap();
        assert_eq!(
            l.key_at(at).as_deref(),
            Some("consolidate.wake-timeout-secs")
        );
        assert_eq!(l.key_at(text.find("[a]").unwrap()), None);
        let l = Locator::new("[[consolidate]]\nmax-memory = 0.5\n");
        assert_eq!(l.key_at(0).as_deref(), Some("consolidate"));
        assert!(l.is_array_of_tables("consolidate"));
        assert!(!Locator::new("[consolidate]\n").is_array_of_tables("consolidate"));
    }

    #[test]
    fn finds_keys_headers_and_inline_tables() {
        let text = "[api]\nlisten = \"x\"\n\n[zones.eu]\nhosts = []\nnodes = { a = 1 }\n";
        let l = Locator::new(text);
        assert_eq!(
            l.find(&["api", "listen"]),
            Some(Place { line: 2, column: 1 })
        );
        assert_eq!(
            l.find(&["zones", "eu", "hosts"]),
            Some(Place { line: 5, column: 1 })
        );
        assert_eq!(
            l.find(&["zones", "eu", "nodes", "a"]),
            Some(Place {
                line: 6,
                column: 11
            })
        );
        assert_eq!(l.find(&["zones", "eu", "missing"]).map(|p| p.line), Some(4));
        assert_eq!(l.find(&["nothing"]), None);
    }
}
