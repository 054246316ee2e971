//! HTTP plumbing of the simulated API: the request gate (latency, auth, faults), parameter
//! decoding, the verified [`Call`] extractor and the `{"data": ...}` envelope.

pub mod call;
pub mod gate;
pub mod params;

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;

pub use call::Call;

use crate::ApiError;

/// A successful answer: `{"data": ...}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Data(pub Value);

impl Data {
    /// Wraps any serializable value.
    pub fn of<T: Serialize>(value: &T) -> Result<Self, ApiError> {
        serde_json::to_value(value)
            .map(Data)
            .map_err(|e| ApiError::die(format!("internal error: {e}")))
    }

    /// `{"data": null}`.
    pub fn null() -> Self {
        Data(Value::Null)
    }
}

impl IntoResponse for Data {
    fn into_response(self) -> Response {
        let body = serde_json::json!({"data": self.0}).to_string();
        let mut r = body.into_response();
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json;charset=UTF-8"),
        );
        r
    }
}

/// What every handler returns.
pub type Reply = Result<Data, ApiError>;
