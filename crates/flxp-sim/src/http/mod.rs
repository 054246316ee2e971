//! HTTP plumbing of the simulated API: the request gate (latency, auth, faults), parameter
//! decoding, the verified [`Call`] extractor and the `{"data": ...}` envelope.

pub mod call;
pub mod gate;
pub mod params;
pub mod privs;

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;

pub use call::Call;

use crate::ApiError;

/// A successful answer: `{"data": ...}`, serialized once, straight from the wire types.
#[derive(Debug, Clone, PartialEq)]
pub struct Data(String);

#[derive(Serialize)]
struct Envelope<'a, T: Serialize> {
    data: &'a T,
}

impl Data {
    /// Wraps any serializable value.
    pub fn of<T: Serialize>(value: &T) -> Result<Self, ApiError> {
        serde_json::to_string(&Envelope { data: value })
            .map(Data)
            .map_err(|e| ApiError::die(format!("internal error: {e}")))
    }

    /// Wraps a JSON value.
    pub fn value(value: Value) -> Self {
        // A `Value` always serializes.
        Data(serde_json::to_string(&Envelope { data: &value }).unwrap_or_default())
    }

    /// `{"data": null}`.
    pub fn null() -> Self {
        Self::value(Value::Null)
    }

    /// The body text.
    pub fn body(&self) -> &str {
        &self.0
    }
}

impl IntoResponse for Data {
    fn into_response(self) -> Response {
        let mut r = self.0.into_response();
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json;charset=UTF-8"),
        );
        r
    }
}

/// What every handler returns.
pub type Reply = Result<Data, ApiError>;
