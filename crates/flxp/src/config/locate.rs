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

    /// The dotted key whose value holds a byte offset (`consolidate.headroom`), when one does:
    /// a type error names the key, not only its line.
    pub fn key_at(&self, offset: usize) -> Option<String> {
        fn walk(t: &dyn TableLike, offset: usize, path: &mut Vec<String>) -> bool {
            for (k, item) in t.iter() {
                path.push(k.to_owned());
                let hit = match item {
                    Item::Table(sub) => walk(sub, offset, path),
                    Item::Value(v) => {
                        v.as_inline_table().is_some_and(|t| walk(t, offset, path))
                            || v.span().is_some_and(|s| s.contains(&offset))
                    }
                    _ => false,
                };
                if hit {
                    return true;
                }
                path.pop();
            }
            false
        }
        let doc = self.doc.as_ref()?;
        let mut path = Vec::new();
        walk(doc.as_table(), offset, &mut path).then(|| path.join("."))
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
