//! The GraphQL API (Contract 4): queries for zones, nodes, guests, placement and plans;
//! mutations `createVM`, `rebalance` and `evacuate`.
//!
//! Every error a resolver returns is an [`ApiError`] with a stable `extensions.code` and a message
//! a user can act on. Bad input is logged at debug level only; failures of Proxmox are logged as
//! errors with the message the user gets; internal failures are logged in full and answered with
//! a generic message naming an incident id. Passwords and tokens never reach either.

pub mod audit;
mod ctx;
mod error;
mod mutation;
pub mod nesting;
pub mod order;
mod query;
mod run;
mod safety;
mod types;
mod views;

use async_graphql::{EmptySubscription, MergedObject, Schema, SchemaBuilder};

pub use error::{ApiError, Code};
pub use mutation::Mutation;
pub use query::Query;
pub use safety::Idempotency;
// For the test that registers a method and checks every place that parses method names.
#[cfg(test)]
pub(crate) use query::method_name;
#[cfg(test)]
pub(crate) use types::BalanceMethodInfo;
pub use views::ViewQuery;

/// The query root: the API's queries and the dashboard's.
#[derive(MergedObject, Debug, Default)]
pub struct QueryRoot(Query, ViewQuery, audit::AuditQuery);

use super::state::AppState;

/// The schema type.
pub type FlxpSchema = Schema<QueryRoot, Mutation, EmptySubscription>;

/// The schema's types and validation limits, without state or extensions: what [`build`]
/// serves, and what the committed SDL (`docs/schema.graphql`) and the dashboard's queries are
/// checked against.
pub fn builder() -> SchemaBuilder<QueryRoot, Mutation, EmptySubscription> {
    Schema::build(QueryRoot::default(), Mutation, EmptySubscription)
        // Deep nesting only costs: the deepest useful selection is about 5 levels.
        .limit_depth(16)
}

/// Builds the schema over the service's state.
pub fn build(state: AppState) -> FlxpSchema {
    builder()
        .data(state)
        // Before the library parses anything: its parser and validator recurse over values.
        .extension(nesting::InputDepth)
        .extension(audit::Audit)
        // async-graphql answers in the order fields finish, not the order they were asked.
        .extension(order::RequestOrder)
        .finish()
}
