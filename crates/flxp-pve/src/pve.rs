//! [`Pve`]: the typed Proxmox VE endpoints over a [`Transport`]; cheap to clone.

use std::fmt;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

use crate::error::{Error, Result};
use crate::request::Request;
use crate::transport::Transport;

/// The Proxmox VE API, one method per endpoint, over a transport `T`.
///
/// `Pve` (a `dyn Transport`) is what the engine and the service hold; [`crate::Client`] is the
/// HTTPS one, which also tells its hosts. Clones share the transport.
pub struct Pve<T: ?Sized = dyn Transport> {
    transport: Arc<T>,
}

impl<T: ?Sized> Clone for Pve<T> {
    fn clone(&self) -> Self {
        Self {
            transport: Arc::clone(&self.transport),
        }
    }
}

impl<T: fmt::Debug + ?Sized> fmt::Debug for Pve<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.transport.fmt(f)
    }
}

impl Pve {
    /// The endpoints over any transport (type-erased: what the engine holds).
    pub fn from_transport(transport: impl Transport + 'static) -> Self {
        Self {
            transport: Arc::new(transport),
        }
    }

    /// The endpoints over a shared transport.
    pub fn from_arc(transport: Arc<dyn Transport>) -> Self {
        Self { transport }
    }
}

impl<T: Transport + 'static> Pve<T> {
    /// The endpoints over this transport, keeping its type (and its own methods).
    pub fn typed(transport: T) -> Self {
        Self {
            transport: Arc::new(transport),
        }
    }

    /// The same endpoints and transport, type-erased.
    pub fn erase(&self) -> Pve {
        Pve {
            transport: Arc::clone(&self.transport) as Arc<dyn Transport>,
        }
    }
}

impl<T: Transport + 'static> From<Pve<T>> for Pve {
    fn from(pve: Pve<T>) -> Self {
        pve.erase()
    }
}

impl<T: Transport + ?Sized> Pve<T> {
    /// The transport the calls go through.
    pub fn transport(&self) -> &Arc<T> {
        &self.transport
    }

    /// The cluster's clock (epoch seconds) as its last answer's `Date` header gave it, if known.
    ///
    /// Task start and end times come from that clock, so comparisons with them (cooldowns, HA
    /// moves in flight) use it rather than this machine's, which may be skewed.
    pub fn server_time(&self) -> Option<i64> {
        self.transport.server_time()
    }

    /// Sends `request` and decodes its `data` as `R`.
    pub(crate) async fn call<R: DeserializeOwned>(&self, request: Request) -> Result<R> {
        let path = request.path.clone();
        let data = self.transport.send(request).await?;
        decode(&path, &data)
    }
}

/// Decodes the `data` of an answer; errors name the endpoint and the JSON path (from `data`).
pub(crate) fn decode<R: DeserializeOwned>(path: &str, data: &RawValue) -> Result<R> {
    #[derive(serde::Deserialize)]
    struct Envelope<R> {
        data: R,
    }
    // The common case in one plain pass from the text: tracking the JSON path costs a wrapper
    // per value, so only an answer that fails is decoded again, to name where.
    if let Ok(decoded) = serde_json::from_str::<R>(data.get()) {
        return Ok(decoded);
    }
    // Decoded inside its envelope so error paths read as Proxmox's answer does: `data[0].maxmem`.
    let envelope = format!("{{\"data\":{}}}", data.get());
    let de = &mut serde_json::Deserializer::from_str(&envelope);
    serde_path_to_error::deserialize::<_, Envelope<R>>(de)
        .map(|e| e.data)
        .map_err(|e| {
            // The position is in the envelope built here, not in Proxmox's body: leave it out.
            let at = format!(
                " at line {} column {}",
                e.inner().line(),
                e.inner().column()
            );
            let message = e.to_string();
            Error::BadResponse {
                endpoint: path.to_owned(),
                message: message.strip_suffix(&at).unwrap_or(&message).to_owned(),
            }
        })
}

#[cfg(test)]
mod tests {
    // Tests may panic on malformed fixtures: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::types::{Resource, Upid};

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    #[test]
    fn an_answer_of_the_wrong_type_names_the_endpoint_and_the_json_path() {
        let data =
            raw(r#"[{"id": "node/pve1", "maxmem": 1}, {"id": "node/pve2", "maxmem": "lots"}]"#);
        let e = decode::<Vec<Resource>>("/cluster/resources", &data).unwrap_err();
        let Error::BadResponse { endpoint, message } = &e else {
            panic!("{e:?}")
        };
        assert_eq!(endpoint, "/cluster/resources");
        // The path as Proxmox's answer reads; no position (it would point into our envelope).
        assert_eq!(
            message,
            r#"data[1].maxmem: expected a number, got the string "lots""#
        );
        assert!(!message.contains(" at line "), "{message}");
    }

    #[test]
    fn a_null_answer_decodes_as_none_or_unit() {
        let null = RawValue::NULL;
        assert_eq!(
            decode::<Option<Upid>>("/nodes/pve1/qemu/100/resize", null).unwrap(),
            None
        );
        decode::<()>("/nodes/pve1/config", null).unwrap();
        let e = decode::<Vec<Resource>>("/cluster/resources", null).unwrap_err();
        assert!(e.to_string().contains("/cluster/resources"), "{e}");
    }

    #[test]
    fn an_answer_decodes_from_its_text_in_one_pass() {
        let data =
            raw(r#"[{"id": "qemu/100", "type": "qemu", "vmid": 100, "maxmem": 8589934592}]"#);
        let rows = decode::<Vec<Resource>>("/cluster/resources", &data).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].vmid, Some(100));
        assert_eq!(rows[0].maxmem, Some(8_589_934_592));
    }
}
