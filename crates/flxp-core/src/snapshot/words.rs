//! serde's messages about a snapshot in words a user knows.
//!
//! serde and serde_json describe a mismatch with Rust's names (`invalid type: map, expected a
//! sequence`, `expected struct Resource`, `u64`). A user wrote JSON, so the message is rewritten
//! with JSON's names, in the `expected …, got …` order of flxp's own lenient readers. Only the
//! words change: the JSON path stays with the caller, and a message serde did not phrase passes
//! through as it is.

/// `message` (one of serde's, perhaps ending in serde_json's ` at line L column C`) in plain words.
pub(super) fn plain(message: &str) -> String {
    let (text, place) = split_place(message);
    let text = rewrite(text).unwrap_or_else(|| text.to_owned());
    format!("{text}{place}")
}

/// Splits off serde_json's ` at line L column C` suffix, kept as it is.
fn split_place(message: &str) -> (&str, &str) {
    if let Some(at) = message.rfind(" at line ") {
        let rest = &message[at + " at line ".len()..];
        let shaped = rest.split_once(" column ").is_some_and(|(line, column)| {
            [line, column]
                .iter()
                .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        });
        if shaped {
            return message.split_at(at);
        }
    }
    (message, "")
}

/// serde's phrasings of a mismatch, rewritten; `None` for any other message.
fn rewrite(text: &str) -> Option<String> {
    if let Some(rest) = text
        .strip_prefix("invalid type: ")
        .or_else(|| text.strip_prefix("invalid value: "))
    {
        // `expected` is what the reader's code says it wants, so it never holds this separator;
        // a string value sent may, hence the last one.
        let (got, expected) = rest.rsplit_once(", expected ")?;
        return Some(format!(
            "expected {}, got {}",
            expected_words(expected),
            got_words(got)
        ));
    }
    if let Some(rest) = text.strip_prefix("invalid length ") {
        let (len, expected) = rest.split_once(", expected ")?;
        return Some(format!(
            "expected {}, got {len} items",
            expected_words(expected)
        ));
    }
    if let Some(field) = text.strip_prefix("missing field ") {
        return Some(format!("the field {field} is missing"));
    }
    None
}

/// What the reader wanted, in JSON's words.
fn expected_words(expected: &str) -> String {
    let struct_name = expected
        .strip_prefix("struct ")
        .or_else(|| expected.strip_prefix("tuple struct "));
    if let Some(name) = struct_name {
        return match entry_of(name) {
            Some(what) => format!("an object ({what})"),
            None => "an object".to_owned(),
        };
    }
    match expected {
        "a sequence" => "an array".to_owned(),
        "a map" => "an object".to_owned(),
        "u8" | "u16" | "u32" | "u64" | "u128" | "usize" => "a whole number, 0 or more".to_owned(),
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => "a whole number".to_owned(),
        "f32" | "f64" => "a number".to_owned(),
        "option" => "a value or null".to_owned(),
        "any valid JSON value" => "a JSON value".to_owned(),
        other => other.to_owned(),
    }
}

/// The snapshot's entry a wire type holds, for `expected an object (...)`.
fn entry_of(type_name: &str) -> Option<&'static str> {
    Some(match type_name {
        "Resource" => "one entry of /cluster/resources",
        "NodeExtra" => "a node's notes, rrddata, storage_avail and volumes",
        "Volume" => "one volume of a node's storage content",
        "Ha" => "HA rules, resources and status",
        "HaRule" => "one HA rule",
        "HaResource" => "one HA resource",
        "HaStatusEntry" => "one entry of the HA status",
        "Task" => "one entry of /cluster/tasks",
        "AnyForm" => "a snapshot document",
        _ => return None,
    })
}

/// What the document held instead, in JSON's words.
fn got_words(got: &str) -> String {
    let quoted = |prefix: &str| {
        got.strip_prefix(prefix)
            .and_then(|v| v.strip_prefix('`'))
            .and_then(|v| v.strip_suffix('`'))
    };
    if let Some(v) = quoted("boolean ") {
        return v.to_owned();
    }
    if let Some(v) = quoted("integer ").or_else(|| quoted("floating point ")) {
        return format!("the number {v}");
    }
    if let Some(v) = got.strip_prefix("string ") {
        return format!("the string {v}");
    }
    match got {
        "sequence" => "an array".to_owned(),
        "map" => "an object".to_owned(),
        "unit value" | "null" => "null".to_owned(),
        other => other.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::plain;

    /// serde's phrasings as the readers of a snapshot produce them, and what a user reads.
    #[test]
    fn serde_phrasings_read_in_json_words() {
        let cases = [
            (
                "invalid type: integer `1`, expected struct Resource at line 1 column 2",
                "expected an object (one entry of /cluster/resources), got the number 1 at line 1 column 2",
            ),
            (
                "invalid type: map, expected a sequence at line 1 column 13",
                "expected an array, got an object at line 1 column 13",
            ),
            (
                "invalid type: sequence, expected a map",
                "expected an object, got an array",
            ),
            (
                r#"invalid type: string "x", expected struct NodeExtra at line 1 column 32"#,
                r#"expected an object (a node's notes, rrddata, storage_avail and volumes), got the string "x" at line 1 column 32"#,
            ),
            (
                "invalid type: boolean `true`, expected a string",
                "expected a string, got true",
            ),
            (
                "invalid type: floating point `1.5`, expected u64",
                "expected a whole number, 0 or more, got the number 1.5",
            ),
            (
                "invalid type: null, expected struct Wrapper",
                "expected an object, got null",
            ),
            (
                r#"invalid value: string "a, expected b", expected i64"#,
                r#"expected a whole number, got the string "a, expected b""#,
            ),
            (
                "invalid length 3, expected a tuple of size 2",
                "expected a tuple of size 2, got 3 items",
            ),
            ("missing field `id`", "the field `id` is missing"),
            // flxp's own messages and serde_json's syntax errors pass through.
            (
                r#"expected a number, got the string "12x" at line 1 column 52"#,
                r#"expected a number, got the string "12x" at line 1 column 52"#,
            ),
            (
                "EOF while parsing a value at line 1 column 11",
                "EOF while parsing a value at line 1 column 11",
            ),
        ];
        for (serde, want) in cases {
            assert_eq!(plain(serde), want, "{serde}");
        }
    }
}
