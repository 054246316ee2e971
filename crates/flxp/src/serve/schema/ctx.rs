//! The service state a resolver reads from its context.

use async_graphql::Context;

use super::error::ApiError;
use crate::serve::state::AppState;

/// The state every resolver reads.
pub(crate) fn state<'a>(ctx: &Context<'a>) -> Result<&'a AppState, ApiError> {
    ctx.data::<AppState>()
        .map_err(|e| ApiError::internal(format!("no service state in the schema: {}", e.message)))
}
