//! [`Pve`]: the typed Proxmox VE endpoints over a [`Transport`]; cheap to clone.

use std::fmt;
use std::sync::Arc;

use serde::de::DeserializeOwned;

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
        decode(&path, data)
    }
}

/// Decodes the `data` of an answer; errors name the endpoint and the JSON path (from `data`).
pub(crate) fn decode<R: DeserializeOwned>(path: &str, data: serde_json::Value) -> Result<R> {
    #[derive(serde::Deserialize)]
    struct Envelope<R> {
        data: R,
    }
    // The common case in one plain pass: tracking the JSON path costs a wrapper per value, so
    // only an answer that fails is decoded again, to name where.
    if let Ok(decoded) = R::deserialize(&data) {
        return Ok(decoded);
    }
    // Decoded inside its envelope so error paths read as Proxmox's answer does: `data[0].maxmem`.
    let envelope = serde_json::Value::Object([("data".to_owned(), data)].into_iter().collect());
    serde_path_to_error::deserialize::<_, Envelope<R>>(envelope)
        .map(|e| e.data)
        .map_err(|e| Error::BadResponse {
            endpoint: path.to_owned(),
            message: e.to_string(),
        })
}
