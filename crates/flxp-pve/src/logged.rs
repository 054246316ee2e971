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

    use std::sync::Arc;

    use flxp_sim::{Scenario, Sim, SimHandle};

    use super::*;
    use crate::{ClientBuilder, Credentials, Host, Secret};

    const TOKEN: &str = "root@pam!flxp=7c1e0b5a-4d2f-4e8a-9b6c-1a2b3c4d5e6f";

    /// The layer changes no answer, and keeps the clock of the transport below.
    #[tokio::test]
    async fn a_logged_call_answers_as_the_transport_below() {
        let mut scenario = Scenario::demo();
        scenario.add_token(TOKEN).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let sim = SimHandle::spawn(listener, Sim::new(scenario).unwrap(), None).unwrap();
        let host: Host = format!("http://{}", sim.addr()).parse().unwrap();
        let (id, secret) = TOKEN.rsplit_once('=').unwrap();
        let credentials = Credentials::Token {
            id: id.into(),
            secret: Secret::new(secret),
        };
        let client = ClientBuilder::new(vec![host], credentials).build().unwrap();
        let http = Arc::clone(client.transport());
        let direct = http
            .send(Request::new(
                crate::endpoint!(GET "/version"),
                "/version".into(),
            ))
            .await
            .unwrap();
        let logged = Logged::new(http);
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
