//! The GraphQL contract as a file: the schema's SDL is committed in `docs/schema.graphql`, and
//! every query the dashboard sends is validated against the schema.
//!
//! After an intended schema change, `FLXP_UPDATE_SDL=1 cargo test -p flxp --test it graphql_schema`
//! rewrites the file; review its diff like any other contract change.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_graphql::extensions::{Extension, ExtensionContext, ExtensionFactory, NextExecute};
use async_graphql::{Response, Value};

/// The committed SDL.
fn sdl_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/schema.graphql")
}

#[test]
fn the_committed_sdl_is_the_schema() {
    let sdl = flxp::serve::schema::builder().finish().sdl();
    let path = sdl_path();
    if std::env::var_os("FLXP_UPDATE_SDL").is_some() {
        std::fs::write(&path, &sdl).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == sdl,
        "the GraphQL schema differs from docs/schema.graphql; if the change is intended, run \
         `FLXP_UPDATE_SDL=1 cargo test -p flxp --test it graphql_schema` and commit the file \
         (first differing line: {:?})",
        committed
            .lines()
            .zip(sdl.lines())
            .find(|(a, b)| a != b)
            .or_else(|| (committed.lines().count() != sdl.lines().count()).then_some(("", "")))
    );
}

/// Answers every request once it is validated, without running a resolver: the documents are
/// checked, not carried out (a mutation would act).
struct ValidateOnly;

impl ExtensionFactory for ValidateOnly {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(ValidateOnly)
    }
}

#[async_trait::async_trait]
impl Extension for ValidateOnly {
    async fn execute(
        &self,
        _ctx: &ExtensionContext<'_>,
        _operation_name: Option<&str>,
        _next: NextExecute<'_>,
    ) -> Response {
        Response::new(Value::Null)
    }
}

/// Reads one single-quoted JavaScript string literal at the start of `s`: its value and the rest.
fn literal(s: &str) -> Option<(String, &str)> {
    let body = s.strip_prefix('\'')?;
    let mut value = String::new();
    let mut chars = body.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => value.push(chars.next()?.1),
            '\'' => return Some((value, &body[i + 1..])),
            c => value.push(c),
        }
    }
    None
}

/// Evaluates a concatenation of string literals and known constants (`'a ' + FIELDS + ' b'`) at
/// the start of `s`; stops at the first token that continues neither.
fn concatenation(s: &str, constants: &BTreeMap<String, String>) -> Option<String> {
    let (mut value, mut rest) = literal(s)?;
    loop {
        let Some(next) = rest.trim_start().strip_prefix('+') else {
            return Some(value);
        };
        let next = next.trim_start();
        if let Some((part, after)) = literal(next) {
            value.push_str(&part);
            rest = after;
        } else {
            let end = next
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(next.len());
            let Some(part) = constants.get(&next[..end]) else {
                return Some(value);
            };
            value.push_str(part);
            rest = &next[end..];
        }
    }
}

/// The GraphQL documents of `dashboard.js`: every string (or concatenation with the script's
/// `var NAME = '...'` field lists) that starts as a query or a mutation does.
fn dashboard_documents() -> Vec<String> {
    let script = include_str!("../../assets/dashboard/dashboard.js");
    let mut constants = BTreeMap::new();
    for line in script.lines() {
        let Some(rest) = line.trim_start().strip_prefix("var ") else {
            continue;
        };
        let Some((name, value)) = rest.split_once(" = ") else {
            continue;
        };
        if let Some(value) = concatenation(value, &constants) {
            constants.insert(name.to_owned(), value);
        }
    }
    // Found by how they start rather than by pairing quotes: comments hold apostrophes.
    let mut documents = Vec::new();
    for start in ["'{ ", "'query(", "'mutation("] {
        for (at, _) in script.match_indices(start) {
            if let Some(document) = concatenation(&script[at..], &constants) {
                documents.push(document);
            }
        }
    }
    documents
}

#[tokio::test]
async fn every_dashboard_query_validates_against_the_schema() {
    let documents = dashboard_documents();
    // All of them, so a change in how the script writes its queries cannot skip one silently.
    assert_eq!(documents.len(), 19, "{documents:#?}");
    let schema = flxp::serve::schema::builder()
        .extension(ValidateOnly)
        .finish();
    for document in &documents {
        let response = schema.execute(document.as_str()).await;
        assert!(
            response.errors.is_empty(),
            "{document}\n{:#?}",
            response.errors
        );
    }
    // The check is not vacuous: a field the schema lacks is refused.
    let wrong = schema.execute("{ zones { name colour } }").await;
    assert_eq!(
        wrong.errors[0].message,
        "Unknown field \"colour\" on type \"ZoneInfo\"."
    );
}
