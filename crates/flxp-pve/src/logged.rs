//! [`Logged`]: a [`Transport`] layer that logs every call once, with how long it took and how it
//! ended, whatever transport is below (HTTPS with its retries, a test double).
//!
//! It logs the method and path only, never the parameters: a form may carry a password or a
//! cloud-init secret.

use async_trait::async_trait;
use tokio::time::Instant;

use crate::error::Result;
use crate::request::Request;
use crate::transport::{Data, Transport};

/// A transport whose calls are logged at debug level (failures too, with the error).
#[derive(Debug)]
pub struct Logged<T> {
    inner: T,
}

impl<T> Logged<T> {
    /// Wraps `inner`.
    pub fn new(inner: T) -> Self {
        Self { inner }
    }

    /// The transport it wraps.
    pub fn inner(&self) -> &T {
        &self.inner
    }
}

#[async_trait]
impl<T: Transport> Transport for Logged<T> {
    async fn send(&self, request: Request) -> Result<Data> {
        let (method, path) = (request.method, request.path.clone());
        let start = Instant::now();
        let answer = self.inner.send(request).await;
        let ms = start.elapsed().as_millis();
        match &answer {
            Ok(_) => tracing::debug!(%method, path, ms, "API call"),
            Err(error) => tracing::debug!(%method, path, ms, %error, "API call failed"),
        }
        answer
    }

    fn server_time(&self) -> Option<i64> {
        self.inner.server_time()
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::fake::FakeTransport;

    /// The layer changes no answer, and keeps the clock of the transport below.
    #[tokio::test]
    async fn a_logged_call_answers_as_the_transport_below() {
        let fake = FakeTransport::default();
        let direct = fake
            .send(Request::new(
                crate::endpoint!(GET "/version"),
                "/version".into(),
            ))
            .await
            .unwrap();
        let logged = Logged::new(fake);
        let through = logged
            .send(Request::new(
                crate::endpoint!(GET "/version"),
                "/version".into(),
            ))
            .await
            .unwrap();
        assert_eq!(through.get(), direct.get());
        assert_eq!(logged.server_time(), logged.inner().server_time());
        let missing = logged
            .send(Request::new(
                crate::endpoint!(GET "/nodes/{node}/status"),
                "/nodes/nowhere/status".into(),
            ))
            .await;
        assert!(missing.is_err());
    }
}
