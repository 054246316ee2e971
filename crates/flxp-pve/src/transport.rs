//! [`Transport`]: the one seam between flxp and Proxmox. It sends a [`Request`] and returns the
//! `data` member of Proxmox's answer as JSON text ([`Data`]); the typed endpoints ([`crate::Pve`])
//! are written once on top of it and decode that text straight into their wire types. Production sends over HTTPS ([`crate::Client`]); layers (metrics) wrap another
//! transport; test doubles answer in memory, usually through a [`crate::Router`].

use std::sync::Arc;

use async_trait::async_trait;

use crate::error::Result;
use crate::request::Request;

/// The `data` member of an answer, as JSON text (checked to be valid JSON, not parsed into a tree).
///
/// Text rather than a `serde_json::Value`: a tree is built, then walked into the typed entries,
/// then dropped, which for `/cluster/resources` of a large cluster costs more than the one pass
/// from text into the typed entries.
pub type Data = Box<serde_json::value::RawValue>;

/// Sends one API call and returns its `data`.
#[async_trait]
pub trait Transport: Send + Sync {
    /// Sends `request`; `Ok` holds the answer's `data` (`null` when Proxmox gives none).
    async fn send(&self, request: Request) -> Result<Data>;

    /// The cluster's clock (epoch seconds) as its last answer's `Date` header gave it, if known.
    ///
    /// Task start and end times come from that clock, so comparisons with them (cooldowns, HA
    /// moves in flight) use it rather than this machine's, which may be skewed.
    fn server_time(&self) -> Option<i64> {
        None
    }
}

#[async_trait]
impl<T: Transport + ?Sized> Transport for Arc<T> {
    async fn send(&self, request: Request) -> Result<Data> {
        (**self).send(request).await
    }

    fn server_time(&self) -> Option<i64> {
        (**self).server_time()
    }
}
