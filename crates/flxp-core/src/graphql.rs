//! GraphQL output for the core's word-valued types (with the `graphql` feature): each is a
//! GraphQL `String` holding the word `--json` prints, so a plan's `type`, `purpose`, `method`,
//! `metric` and `warnings` read the same in both contracts. The structs derive their objects
//! where they are defined; a placement candidate's `scores` are its shares, with their weights.

use std::borrow::Cow;

use async_graphql::parser::types::Field;
use async_graphql::registry::Registry;
use async_graphql::{ContextSelectionSet, OutputType, Positioned, ServerResult, Value};

use crate::Warning;
use crate::balance::{
    LoadKind, Measure, PlanSource, PlanStop, Purpose, Refusal, StayKind, UsageMode,
};
use crate::cluster::GuestKind;
use crate::placement::{Candidate, Score};

/// Implements [`OutputType`] as the built-in `String`, the value being `$word(self)`.
macro_rules! as_string {
    ($($ty:ty => $word:expr),* $(,)?) => {$(
        impl OutputType for $ty {
            fn type_name() -> Cow<'static, str> {
                <String as OutputType>::type_name()
            }

            fn create_type_info(registry: &mut Registry) -> String {
                <String as OutputType>::create_type_info(registry)
            }

            async fn resolve(
                &self,
                _: &ContextSelectionSet<'_>,
                _: &Positioned<Field>,
            ) -> ServerResult<Value> {
                let word: fn(&$ty) -> String = $word;
                Ok(Value::String(word(self)))
            }
        }
    )*};
}

as_string! {
    GuestKind => |k| k.as_str().to_owned(),
    Purpose => |p| p.as_str().to_owned(),
    PlanSource => |s| s.as_str().to_owned(),
    LoadKind => |k| k.as_str().to_owned(),
    Measure => |m| m.as_str().to_owned(),
    StayKind => |k| k.as_str().to_owned(),
    UsageMode => |m| m.as_str().to_owned(),
    Refusal => |r| r.as_str().to_owned(),
    PlanStop => ToString::to_string,
    Warning => ToString::to_string,
}

#[async_graphql::ComplexObject]
impl Candidate {
    /// Each scorer's share.
    #[graphql(name = "scores")]
    async fn graphql_scores(&self) -> Vec<Score> {
        self.shares()
    }
}
