//! Response keys in the order the request selected them, as the GraphQL spec asks ("Serialized
//! Map Ordering": a response map's keys in the order of the selection set).
//!
//! async-graphql resolves a query's fields concurrently and adds each to the response map when
//! it finishes (`FuturesUnordered` in its `resolver_utils/container.rs`, `do_resolve_container`).
//! A field that waits (a zone read, tokio's cooperative budget running out past about a hundred
//! fields) then lands after the ones selected below it: a query of 3,000 aliases came back
//! shuffled from about the 130th. [`RequestOrder`] keeps the parsed query and, after execution,
//! puts every object's keys back in selection order (fragments expanded where they stand),
//! lists element by element. Keys the selection does not name (none today) keep their place
//! after the named ones.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_graphql::extensions::{
    Extension, ExtensionContext, ExtensionFactory, NextExecute, NextParseQuery,
};
use async_graphql::parser::types::{
    DocumentOperations, ExecutableDocument, FragmentDefinition, Selection, SelectionSet,
};
use async_graphql::{Name, Positioned, Response, ServerResult, Value, Variables};

/// How deep fragment spreads are followed: the validator refuses cycles before execution; this
/// only bounds the work should one get through.
const MAX_SPREAD_DEPTH: usize = 32;

/// The extension putting response keys back in request order.
pub struct RequestOrder;

impl ExtensionFactory for RequestOrder {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(Reorder {
            document: Mutex::new(None),
        })
    }
}

/// One request's parsed query, kept from parsing to the end of execution.
struct Reorder {
    document: Mutex<Option<ExecutableDocument>>,
}

#[async_trait::async_trait]
impl Extension for Reorder {
    async fn parse_query(
        &self,
        ctx: &ExtensionContext<'_>,
        query: &str,
        variables: &Variables,
        next: NextParseQuery<'_>,
    ) -> ServerResult<ExecutableDocument> {
        let document = next.run(ctx, query, variables).await?;
        *self.document.lock().unwrap_or_else(|p| p.into_inner()) = Some(document.clone());
        Ok(document)
    }

    async fn execute(
        &self,
        ctx: &ExtensionContext<'_>,
        operation_name: Option<&str>,
        next: NextExecute<'_>,
    ) -> Response {
        let mut response = next.run(ctx, operation_name).await;
        let document = self
            .document
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(document) = document {
            in_request_order(&mut response.data, &document, operation_name);
        }
        response
    }
}

/// Puts the keys of `data`, the answer to `operation_name` of `document`, in selection order.
pub fn in_request_order(
    data: &mut Value,
    document: &ExecutableDocument,
    operation_name: Option<&str>,
) {
    let operation = match (&document.operations, operation_name) {
        (DocumentOperations::Single(op), _) => op,
        (DocumentOperations::Multiple(ops), Some(name)) => match ops.get(name) {
            Some(op) => op,
            None => return,
        },
        (DocumentOperations::Multiple(ops), None) if ops.len() == 1 => match ops.values().next() {
            Some(op) => op,
            None => return,
        },
        (DocumentOperations::Multiple(_), None) => return,
    };
    reorder(
        data,
        &[&operation.node.selection_set.node],
        &document.fragments,
    );
}

type Fragments = HashMap<Name, Positioned<FragmentDefinition>>;

/// Reorders `value` as selected by `sets` (all the selection sets that apply to it).
fn reorder(value: &mut Value, sets: &[&SelectionSet], fragments: &Fragments) {
    match value {
        Value::List(items) => {
            for item in items {
                reorder(item, sets, fragments);
            }
        }
        Value::Object(map) => {
            let mut keys = Keys::default();
            for set in sets {
                collect(set, fragments, 0, &mut keys);
            }
            let came = std::mem::take(map);
            let mut unnamed = Vec::new();
            let mut placed: Vec<Option<(Name, Value)>> = vec![None; keys.order.len()];
            for (key, v) in came {
                match keys.at.get(&key) {
                    Some(&i) => placed[i] = Some((key, v)),
                    // What no selection names keeps the order it came in, after the rest.
                    None => unnamed.push((key, v)),
                }
            }
            for (i, entry) in placed.into_iter().enumerate() {
                if let Some((key, mut v)) = entry {
                    reorder(&mut v, &keys.order[i].1, fragments);
                    map.insert(key, v);
                }
            }
            map.extend(unnamed);
        }
        _ => {}
    }
}

/// The response keys of one object in selection order, each with the selection sets of its
/// fields (one key may be selected several times, and its sub-selections merge).
#[derive(Default)]
struct Keys<'a> {
    order: Vec<(Name, Vec<&'a SelectionSet>)>,
    /// Where each key is in `order`.
    at: HashMap<Name, usize>,
}

/// Appends the response keys `set` selects, first appearance first.
fn collect<'a>(set: &'a SelectionSet, fragments: &'a Fragments, depth: usize, keys: &mut Keys<'a>) {
    for selection in &set.items {
        match &selection.node {
            Selection::Field(field) => {
                let key = field.node.response_key().node.clone();
                let sub = &field.node.selection_set.node;
                match keys.at.get(&key) {
                    Some(&i) => keys.order[i].1.push(sub),
                    None => {
                        keys.at.insert(key.clone(), keys.order.len());
                        keys.order.push((key, vec![sub]));
                    }
                }
            }
            Selection::InlineFragment(f) => {
                collect(&f.node.selection_set.node, fragments, depth, keys);
            }
            Selection::FragmentSpread(s) if depth < MAX_SPREAD_DEPTH => {
                if let Some(f) = fragments.get(&s.node.fragment_name.node) {
                    collect(&f.node.selection_set.node, fragments, depth + 1, keys);
                }
            }
            Selection::FragmentSpread(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may panic

    use super::*;

    /// The keys of each object in `v`, depth first, as `a,b,{c,d}`.
    fn keys(v: &Value) -> String {
        match v {
            Value::Object(m) => m
                .iter()
                .map(|(k, v)| match v {
                    Value::Object(_) | Value::List(_) => format!("{k}{}", keys(v)),
                    _ => k.to_string(),
                })
                .collect::<Vec<_>>()
                .join(","),
            Value::List(items) => {
                let inner: Vec<String> = items.iter().map(|i| format!("{{{}}}", keys(i))).collect();
                format!("[{}]", inner.join(""))
            }
            _ => String::new(),
        }
    }

    fn object(pairs: &[(&str, Value)]) -> Value {
        Value::Object(
            pairs
                .iter()
                .map(|(k, v)| (Name::new(k), v.clone()))
                .collect(),
        )
    }

    #[test]
    fn keys_come_back_in_selection_order_through_fragments_and_lists() {
        let query = "query Q { z: zones { name b: id ...More } a: version ...Top }
                     fragment More on Zone { ... on Zone { nodes } name }
                     fragment Top on Query { y: version }
                     query Other { c: version }";
        let document = async_graphql::parser::parse_query(query).unwrap();
        let zone = object(&[
            ("nodes", Value::Null),
            ("name", Value::Null),
            ("b", Value::Null),
        ]);
        let mut data = object(&[
            ("y", Value::Null),
            ("a", Value::Null),
            ("z", Value::List(vec![zone.clone(), zone])),
            ("extra", Value::Null),
        ]);
        in_request_order(&mut data, &document, Some("Q"));
        assert_eq!(keys(&data), "z[{name,b,nodes}{name,b,nodes}],a,y,extra");
        // No such operation: left as it came.
        let before = keys(&data);
        in_request_order(&mut data, &document, Some("Missing"));
        assert_eq!(keys(&data), before);
    }

    #[test]
    fn three_thousand_aliases_keep_their_order() {
        let fields: Vec<String> = (0..3000).map(|i| format!("f{i}: version")).collect();
        let document =
            async_graphql::parser::parse_query(format!("{{ {} }}", fields.join(" "))).unwrap();
        // Finished in reverse.
        let mut data = Value::Object(
            (0..3000)
                .rev()
                .map(|i| (Name::new(format!("f{i}")), Value::from(i)))
                .collect(),
        );
        in_request_order(&mut data, &document, None);
        let Value::Object(m) = &data else { panic!() };
        let got: Vec<String> = m.keys().map(ToString::to_string).collect();
        let want: Vec<String> = (0..3000).map(|i| format!("f{i}")).collect();
        assert_eq!(got, want);
        assert_eq!(m["f2999"], Value::from(2999));
    }
}
