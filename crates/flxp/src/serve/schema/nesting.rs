//! A bound on how deep a request nests, checked before the GraphQL library parses it.
//!
//! The parser, the validator and the executor of async-graphql all recurse over input values
//! (`[[[...]]]`, `{a:{a:...}}`), with no limit of their own: one request of a few kilobytes
//! nesting a value 800 levels deep overflowed a worker's stack and aborted the whole process.
//! [`InputDepth`] looks at the raw query text and the variables first, without recursion, and
//! refuses what nests too deep with `BAD_INPUT`. Selections stay bounded by the schema's own
//! depth limit; this only adds a ceiling on all brackets together, far above any useful query.

use std::sync::Arc;

use async_graphql::extensions::{Extension, ExtensionContext, ExtensionFactory, NextParseQuery};
use async_graphql::parser::types::ExecutableDocument;
use async_graphql::{Pos, ServerError, ServerResult, Value as ConstValue, Variables};

use super::Code;

/// How deep one input value (an argument, a default or a variable) may nest lists and objects:
/// the API's deepest real input (a `createVM` interface list) has 3 levels.
pub const MAX_INPUT_DEPTH: usize = 32;

/// How deep a query may nest brackets of every kind (selections, arguments, values) together.
pub const MAX_DOCUMENT_DEPTH: usize = 128;

/// Where a query nests too deep, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooDeep {
    /// The user's message.
    pub message: String,
    /// Line and column (1-based) of the bracket past the bound, for the query text.
    pub at: Option<(usize, usize)>,
}

/// Checks the raw query text: no input value nests lists or objects more than
/// [`MAX_INPUT_DEPTH`] levels, no bracket more than [`MAX_DOCUMENT_DEPTH`] levels. Strings, block
/// strings and comments are skipped; a document that does not parse is left to the parser.
pub fn check_document(text: &str) -> Result<(), TooDeep> {
    // The open brackets; an input value is what nests inside the innermost `(` (arguments,
    // directive arguments and variable definitions with their defaults).
    let mut open: Vec<u8> = Vec::new();
    let mut parens: Vec<usize> = Vec::new();
    let bytes = text.as_bytes();
    let (mut line, mut line_start) = (1, 0);
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'\n' => {
                line += 1;
                line_start = i + 1;
            }
            b'#' => {
                while i + 1 < bytes.len() && !matches!(bytes[i + 1], b'\n' | b'\r') {
                    i += 1;
                }
            }
            b'"' if bytes[i..].starts_with(b"\"\"\"") => {
                // A block string ends at the next `"""` not escaped as `\"""`.
                i += 3;
                while i < bytes.len() && !bytes[i..].starts_with(b"\"\"\"") {
                    if bytes[i..].starts_with(b"\\\"\"\"") {
                        i += 3;
                    } else if bytes[i] == b'\n' {
                        line += 1;
                        line_start = i + 1;
                    }
                    i += 1;
                }
                i += 2;
            }
            b'"' => {
                i += 1;
                while i < bytes.len() && !matches!(bytes[i], b'"' | b'\n') {
                    if bytes[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                if bytes.get(i) == Some(&b'\n') {
                    // An unterminated string: the parser says so; keep the line count right.
                    continue;
                }
            }
            b'(' | b'[' | b'{' => {
                let at = Some((line, text[line_start..i].chars().count() + 1));
                if b == b'(' {
                    parens.push(open.len());
                } else if let Some(&p) = parens.last() {
                    let depth = open.len() - p;
                    if depth > MAX_INPUT_DEPTH {
                        return Err(TooDeep {
                            message: format!(
                                "an input value nests lists or objects more than {MAX_INPUT_DEPTH} levels deep"
                            ),
                            at,
                        });
                    }
                }
                open.push(b);
                if open.len() > MAX_DOCUMENT_DEPTH {
                    return Err(TooDeep {
                        message: format!(
                            "the query nests brackets more than {MAX_DOCUMENT_DEPTH} levels deep"
                        ),
                        at,
                    });
                }
            }
            b')' | b']' | b'}' => {
                let closed = open.pop();
                if closed == Some(b'(') {
                    parens.pop();
                }
            }
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

/// Checks each variable's value: lists and objects nested at most [`MAX_INPUT_DEPTH`] levels.
/// Iterative, so that the check itself cannot overflow.
pub fn check_variables(variables: &Variables) -> Result<(), TooDeep> {
    for (name, value) in variables.iter() {
        let mut stack: Vec<(&ConstValue, usize)> = vec![(value, 1)];
        while let Some((v, depth)) = stack.pop() {
            let children: Box<dyn Iterator<Item = &ConstValue>> = match v {
                ConstValue::List(items) => Box::new(items.iter()),
                ConstValue::Object(fields) => Box::new(fields.values()),
                _ => continue,
            };
            if depth > MAX_INPUT_DEPTH {
                return Err(TooDeep {
                    message: format!(
                        "variable ${name} nests lists or objects more than {MAX_INPUT_DEPTH} levels deep"
                    ),
                    at: None,
                });
            }
            stack.extend(children.map(|c| (c, depth + 1)));
        }
    }
    Ok(())
}

/// The schema extension running both checks before the query is parsed.
pub struct InputDepth;

impl ExtensionFactory for InputDepth {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(InputDepthCheck)
    }
}

struct InputDepthCheck;

#[async_trait::async_trait]
impl Extension for InputDepthCheck {
    async fn parse_query(
        &self,
        ctx: &ExtensionContext<'_>,
        query: &str,
        variables: &Variables,
        next: NextParseQuery<'_>,
    ) -> ServerResult<ExecutableDocument> {
        if let Err(e) = check_document(query).and_then(|()| check_variables(variables)) {
            tracing::debug!(error = %e.message, "request refused before parsing");
            let pos = e.at.map(|(line, column)| Pos { line, column });
            let mut error = ServerError::new(e.message, pos);
            error
                .extensions
                .get_or_insert_with(Default::default)
                .set("code", Code::BadInput.as_str());
            return Err(error);
        }
        next.run(ctx, query, variables).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may panic

    use super::*;

    fn nested(open: &str, close: &str, depth: usize) -> String {
        format!("{}1{}", open.repeat(depth), close.repeat(depth))
    }

    fn placement(value: &str) -> String {
        format!("{{ placement(zone: \"sim\", request: {{memory: {value}}}) {{ node }} }}")
    }

    #[test]
    fn input_values_nested_past_the_bound_are_refused_where_they_pass_it() {
        // The request object is level 1, `memory`'s list level 2: 31 lists reach 32.
        assert_eq!(check_document(&placement(&nested("[", "]", 31))), Ok(()));
        let e = check_document(&placement(&nested("[", "]", 32))).unwrap_err();
        assert_eq!(
            e.message,
            "an input value nests lists or objects more than 32 levels deep"
        );
        // `{ placement(zone: "sim", request: {memory: ` is 43 characters, then 31 brackets.
        assert_eq!(e.at, Some((1, 75)));
        let e = check_document(&placement(&nested("{a:", "}", 3000))).unwrap_err();
        assert_eq!(e.at, Some((1, 44 + 3 * 31)));
        // Defaults of variable definitions and directive arguments are input values too.
        let deep = nested("[", "]", 40);
        for q in [
            format!("query($r: [Int] = {deep}) {{ zones {{ name }} }}"),
            format!("{{ zones @skip(if: {deep}) {{ name }} }}"),
        ] {
            assert!(check_document(&q).is_err(), "{q}");
        }
    }

    #[test]
    fn brackets_in_strings_and_comments_do_not_count() {
        let deep = nested("[", "]", 200);
        for q in [
            format!("{{ placement(zone: \"{deep}\", request: {{}}) {{ node }} }}"),
            format!("{{ placement(zone: \"\\\"{deep}\", request: {{}}) {{ node }} }}"),
            format!(
                "{{ placement(zone: \"\"\"{deep}\\\"\"\"{deep}\"\"\", request: {{}}) {{ node }} }}"
            ),
            format!("# {deep}\n{{ zones {{ name }} }}"),
        ] {
            assert_eq!(check_document(&q), Ok(()), "{q}");
        }
        // After a block string, counting goes on, lines included.
        let q = format!("{{ a(b: \"\"\"x\ny\"\"\", c: {deep}) {{ d }} }}");
        assert_eq!(check_document(&q).unwrap_err().at, Some((2, 42)));
    }

    #[test]
    fn selections_nest_up_to_the_document_bound() {
        let q = |d: usize| format!("{{ zones {} }}", nested("{ name ", "}", d));
        assert_eq!(check_document(&q(127)), Ok(()));
        let e = check_document(&q(128)).unwrap_err();
        assert_eq!(
            e.message,
            "the query nests brackets more than 128 levels deep"
        );
    }

    #[test]
    fn variables_nested_past_the_bound_are_refused_naming_the_variable() {
        let vars = |v: serde_json::Value| Variables::from_json(serde_json::json!({ "r": v }));
        let list =
            |d: usize| -> serde_json::Value { serde_json::from_str(&nested("[", "]", d)).unwrap() };
        assert_eq!(check_variables(&vars(list(32))), Ok(()));
        let e = check_variables(&vars(list(33))).unwrap_err();
        assert_eq!(
            e.message,
            "variable $r nests lists or objects more than 32 levels deep"
        );
        let object: serde_json::Value = serde_json::from_str(&nested("{\"a\":", "}", 33)).unwrap();
        assert!(check_variables(&vars(object)).is_err());
    }
}
