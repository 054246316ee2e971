//! [`Request`]: one Proxmox API call as a value (method, path, parameters), built apart from
//! sending it, so every [`crate::Transport`] (HTTP, a test double, a metrics layer) sees the same.

use std::fmt;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use reqwest::Method;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};
use crate::types::form;

/// One API call: what a [`crate::Transport`] sends and what test doubles route on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// HTTP method.
    pub method: Method,
    /// Path below `/api2/json`, its segments already percent-encoded.
    pub path: String,
    /// Form-encoded parameters: the query string of a GET or DELETE, the body of a POST or PUT.
    pub params: Option<String>,
    /// The endpoint's template (`GET /nodes/{node}/status`): a bounded label for metrics and logs.
    pub endpoint: &'static str,
}

impl Request {
    /// A call of `endpoint` (`"GET /nodes/{node}/status"`) at this concrete path, without
    /// parameters. The method is the template's first word.
    pub fn new(endpoint: &'static str, path: String) -> Self {
        let method = match endpoint.split_once(' ').map_or(endpoint, |(m, _)| m) {
            "POST" => Method::POST,
            "PUT" => Method::PUT,
            "DELETE" => Method::DELETE,
            _ => Method::GET,
        };
        Self {
            method,
            path,
            params: None,
            endpoint,
        }
    }

    /// Adds form-encoded parameters (an empty encoding sends none).
    pub fn params<P: Serialize + ?Sized>(mut self, params: &P) -> Result<Self> {
        let encoded = form::to_form(params).map_err(|e| Error::Request {
            endpoint: self.path.clone(),
            message: e.to_string(),
        })?;
        self.params = Some(encoded).filter(|s| !s.is_empty());
        Ok(self)
    }

    /// Whether repeating the call cannot change anything in the cluster (a GET).
    pub fn is_read(&self) -> bool {
        self.method == Method::GET
    }

    /// Decodes the parameters back into a parameter type (for test doubles).
    pub fn decode_params<P: DeserializeOwned>(&self) -> Result<P> {
        form::from_form(self.params.as_deref().unwrap_or("")).map_err(|e| Error::Request {
            endpoint: self.path.clone(),
            message: e.to_string(),
        })
    }
}

/// `METHOD /path`, the form test doubles and logs name a call by.
impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.method, self.path)
    }
}

/// What a path segment encodes: all but RFC 3986's `pchar` (unreserved, sub-delims, `:` and `@`),
/// and `%` itself, so a segment can never add a `/`, `?` or `#` to the path.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'!')
    .remove(b'$')
    .remove(b'&')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')')
    .remove(b'*')
    .remove(b'+')
    .remove(b',')
    .remove(b';')
    .remove(b'=')
    .remove(b':')
    .remove(b'@');

/// Percent-encodes one path segment (a node name, a sid, a UPID) so it cannot change the path.
pub(crate) fn seg(s: &str) -> String {
    utf8_percent_encode(s, SEGMENT).to_string()
}

/// Undoes [`seg`]: a path segment as the caller gave it (for test doubles reading paths).
pub(crate) fn unseg(s: &str) -> String {
    percent_decode_str(s).decode_utf8_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_segments_keep_upids_and_sids_readable_but_cannot_escape() {
        assert_eq!(
            seg("UPID:pve1:000A1B2C:0123ABCD:6929A5C0:qmigrate:105:root@pam!flxp:"),
            "UPID:pve1:000A1B2C:0123ABCD:6929A5C0:qmigrate:105:root@pam!flxp:"
        );
        assert_eq!(seg("vm:100"), "vm:100");
        assert_eq!(seg("../x y?#"), "..%2Fx%20y%3F%23");
        assert_eq!(unseg("..%2Fx%20y%3F%23"), "../x y?#");
        // `%` and non-ASCII are encoded too, so decoding gives back exactly what was given.
        assert_eq!(seg("50%é"), "50%25%C3%A9");
        assert_eq!(unseg("50%25%C3%A9"), "50%é");
        assert_eq!(unseg("%zz%4"), "%zz%4");
    }

    #[test]
    fn the_method_comes_from_the_endpoint_template() {
        let r = Request::new("PUT /nodes/{node}/config", "/nodes/pve1/config".into());
        assert_eq!(r.method, Method::PUT);
        assert!(!r.is_read());
        assert_eq!(r.to_string(), "PUT /nodes/pve1/config");
    }
}
