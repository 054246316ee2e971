//! Proxmox API errors as the simulator answers them: status, a message whose first line becomes
//! the HTTP reason phrase, and the per-parameter `errors` map of 400s.
//!
//! The world model returns these directly: in Proxmox a failed check is a `die` with a text
//! (500) or a parameter exception (400), and clients branch on exactly those texts.

use std::collections::BTreeMap;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// An error answer of the simulated API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status (400, 401, 403, 500, 501, 595, ...).
    pub status: u16,
    /// The message; its first line is the reason phrase.
    pub message: String,
    /// Per-parameter messages of a parameter error.
    pub errors: Option<BTreeMap<String, String>>,
    /// Whether the body is empty (authentication failures), not the JSON envelope.
    pub empty_body: bool,
}

impl ApiError {
    /// An error with a status and a message.
    pub fn new(status: u16, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            errors: None,
            empty_body: false,
        }
    }

    /// A plain `die` in Proxmox: 500 with the text.
    pub fn die(message: impl Into<String>) -> Self {
        Self::new(500, message)
    }

    /// `400 Parameter verification failed.` with the per-parameter messages.
    pub fn params(errors: BTreeMap<String, String>) -> Self {
        ApiError {
            errors: Some(errors),
            ..Self::new(400, "Parameter verification failed.")
        }
    }

    /// A parameter error on one parameter (`raise_param_exc`).
    pub fn param(name: &str, message: impl Into<String>) -> Self {
        Self::params(BTreeMap::from([(name.to_string(), message.into())]))
    }

    /// `501 Method 'GET /foo' not implemented`.
    pub fn not_implemented(method: &str, path: &str) -> Self {
        Self::new(501, format!("Method '{method} {path}' not implemented"))
    }

    /// `401 Authentication failed!` with an empty body.
    pub fn auth_failed() -> Self {
        ApiError {
            empty_body: true,
            ..Self::new(401, "Authentication failed!")
        }
    }

    /// `401 No ticket` with an empty body: no credentials at all.
    pub fn no_ticket() -> Self {
        ApiError {
            empty_body: true,
            ..Self::new(401, "No ticket")
        }
    }

    /// `401 Permission denied - invalid csrf token`.
    pub fn bad_csrf() -> Self {
        ApiError {
            empty_body: true,
            ..Self::new(401, "Permission denied - invalid csrf token")
        }
    }

    /// `403 Permission check failed (<path>, <privilege>)`.
    pub fn permission(path: &str, privilege: &str) -> Self {
        Self::new(
            403,
            format!("Permission check failed ({path}, {privilege})"),
        )
    }

    /// `VM is locked (<lock>)`.
    pub fn locked(lock: &str) -> Self {
        Self::die(format!("VM is locked ({lock})"))
    }

    /// The reason phrase: the message's first line.
    pub fn reason(&self) -> &str {
        self.message.lines().next().unwrap_or("")
    }

    /// The JSON body (`{"data":null,"message":"...\n","errors":{...}}`).
    pub fn body(&self) -> serde_json::Value {
        let mut message = self.message.clone();
        if !message.ends_with('\n') {
            message.push('\n');
        }
        let mut body = serde_json::json!({"data": null, "message": message});
        if let Some(errors) = &self.errors {
            body["errors"] = serde_json::json!(errors);
        }
        body
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.status, self.reason())
    }
}

impl std::error::Error for ApiError {}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = if self.empty_body {
            (status, "").into_response()
        } else {
            let mut r = (status, self.body().to_string()).into_response();
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json;charset=UTF-8"),
            );
            r
        };
        // A reason phrase with bytes HTTP forbids would be refused; Proxmox then sends a plain
        // status line too.
        if let Ok(reason) = hyper::ext::ReasonPhrase::try_from(self.reason().as_bytes().to_vec()) {
            response.extensions_mut().insert(reason);
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_and_reasons_follow_proxmox() {
        let e = ApiError::param("vmid", "VM 2004 already exists");
        assert_eq!(e.reason(), "Parameter verification failed.");
        assert_eq!(
            e.body(),
            serde_json::json!({"data": null, "message": "Parameter verification failed.\n",
                "errors": {"vmid": "VM 2004 already exists"}})
        );
        let e = ApiError::die("first line\nsecond");
        assert_eq!(e.reason(), "first line");
        assert_eq!(e.body()["message"], "first line\nsecond\n");
        assert_eq!(
            ApiError::not_implemented("GET", "/foo").message,
            "Method 'GET /foo' not implemented"
        );
    }
}
