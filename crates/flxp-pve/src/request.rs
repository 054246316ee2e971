//! [`Request`]: one Proxmox API call as a value (method, path, parameters), built apart from
//! sending it, so every [`crate::Transport`] (HTTP, a test double, a metrics layer) sees the same.

use std::fmt;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};
use crate::types::form;

/// The HTTP methods of Proxmox's API: a closed set, so a misspelt method cannot compile (a
/// fallback to GET would turn a write into a read that the [`crate::Retry`] layer repeats).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// A read: changes nothing, so it may be repeated.
    Get,
    /// A write that creates or starts something (a task, a guest, a ticket).
    Post,
    /// A write that sets something (a config).
    Put,
    /// A write that removes something.
    Delete,
}

impl Method {
    /// The method as HTTP spells it (`GET`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Get => "GET",
            Self::Post => "POST",
            Self::Put => "PUT",
            Self::Delete => "DELETE",
        }
    }

    /// Whether repeating the call cannot change anything in the cluster (a GET).
    pub const fn is_read(self) -> bool {
        matches!(self, Self::Get)
    }

    /// Whether the parameters travel in the query string (GET, DELETE) rather than the body.
    pub const fn params_in_query(self) -> bool {
        matches!(self, Self::Get | Self::Delete)
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<Method> for reqwest::Method {
    fn from(method: Method) -> Self {
        match method {
            Method::Get => Self::GET,
            Method::Post => Self::POST,
            Method::Put => Self::PUT,
            Method::Delete => Self::DELETE,
        }
    }
}

/// An endpoint: its [`Method`] and its label (`GET /nodes/{node}/status`), the method's name
/// followed by the path template. Built by [`crate::endpoint!`], so the two always agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Endpoint {
    method: Method,
    label: &'static str,
}

impl Endpoint {
    /// Use [`crate::endpoint!`]: it writes the label from the method, so they cannot disagree.
    #[doc(hidden)]
    pub const fn from_parts(method: Method, label: &'static str) -> Self {
        Self { method, label }
    }

    /// The HTTP method.
    pub const fn method(self) -> Method {
        self.method
    }

    /// `GET /nodes/{node}/status`: a bounded label for metrics and logs.
    pub const fn label(self) -> &'static str {
        self.label
    }

    /// The path template (`/nodes/{node}/status`).
    pub fn template(self) -> &'static str {
        self.label.split_once(' ').map_or(self.label, |(_, t)| t)
    }
}

/// An [`Endpoint`] from a method and a path template: `endpoint!(GET "/nodes/{node}/status")`.
/// The method is one of `GET`, `POST`, `PUT`, `DELETE`; anything else does not compile.
///
/// ```
/// let e = flxp_pve::endpoint!(POST "/nodes/{node}/qemu/{vmid}/migrate");
/// assert_eq!(e.method(), flxp_pve::Method::Post);
/// assert_eq!(e.label(), "POST /nodes/{node}/qemu/{vmid}/migrate");
/// ```
///
/// A misspelt method is a compile error, never a GET:
///
/// ```compile_fail
/// let e = flxp_pve::endpoint!(PSOT "/nodes/{node}/qemu/{vmid}/migrate");
/// ```
#[macro_export]
macro_rules! endpoint {
    (GET $template:literal) => {
        $crate::Endpoint::from_parts($crate::Method::Get, concat!("GET ", $template))
    };
    (POST $template:literal) => {
        $crate::Endpoint::from_parts($crate::Method::Post, concat!("POST ", $template))
    };
    (PUT $template:literal) => {
        $crate::Endpoint::from_parts($crate::Method::Put, concat!("PUT ", $template))
    };
    (DELETE $template:literal) => {
        $crate::Endpoint::from_parts($crate::Method::Delete, concat!("DELETE ", $template))
    };
}

/// One API call: what a [`crate::Transport`] sends and what test doubles route on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// HTTP method (the endpoint's).
    pub method: Method,
    /// Path below `/api2/json`, its segments already percent-encoded.
    pub path: String,
    /// Form-encoded parameters: the query string of a GET or DELETE, the body of a POST or PUT.
    pub params: Option<String>,
    /// The endpoint's template (`GET /nodes/{node}/status`): a bounded label for metrics and logs.
    pub endpoint: &'static str,
}

impl Request {
    /// A call of `endpoint` (`endpoint!(GET "/nodes/{node}/status")`) at this concrete path,
    /// without parameters.
    pub fn new(endpoint: Endpoint, path: String) -> Self {
        Self {
            method: endpoint.method(),
            path,
            params: None,
            endpoint: endpoint.label(),
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
        self.method.is_read()
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
        let r = Request::new(
            endpoint!(PUT "/nodes/{node}/config"),
            "/nodes/pve1/config".into(),
        );
        assert_eq!(r.method, Method::Put);
        assert!(!r.is_read());
        assert_eq!(r.to_string(), "PUT /nodes/pve1/config");
        assert_eq!(r.endpoint, "PUT /nodes/{node}/config");
    }

    #[test]
    fn an_endpoint_label_is_its_method_and_template() {
        let e = endpoint!(DELETE "/nodes/{node}/qemu/{vmid}");
        assert_eq!(e.method(), Method::Delete);
        assert_eq!(e.label(), "DELETE /nodes/{node}/qemu/{vmid}");
        assert_eq!(e.template(), "/nodes/{node}/qemu/{vmid}");
        assert!(endpoint!(GET "/version").method().is_read());
        for m in [Method::Post, Method::Put, Method::Delete] {
            assert!(!m.is_read(), "{m}");
        }
        assert_eq!(
            reqwest::Method::from(Method::Delete),
            reqwest::Method::DELETE
        );
    }
}
