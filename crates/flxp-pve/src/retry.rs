//! [`Retry`]: a [`Transport`] layer that repeats a failed call after a backoff, only when
//! repeating cannot do a second write ([`worth_repeating`]).
//!
//! It knows nothing of hosts: the transport below it fails over between hosts within one try
//! (the [`crate::HttpTransport`] tries every host once), and this layer adds rounds of that.

use async_trait::async_trait;
use tokio::time::Duration;

use crate::error::{ApiErrorKind, Error, Result};
use crate::request::Request;
use crate::transport::{Data, Transport};

/// The longest wait between two tries, however many rounds came before.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Whether a call that failed with `error` may be sent again.
///
/// A connection that was never made sent nothing, so any call may be repeated. A read (GET)
/// changes nothing, so it is also repeated after a timeout, a broken connection or a server
/// error (5xx, or 59x from the node proxy). A refused certificate will be refused again, and a
/// write that may have reached Proxmox is never repeated: its error is returned as it is.
pub fn worth_repeating(request: &Request, error: &Error) -> bool {
    repeatable(request.is_read(), error)
}

/// [`worth_repeating`] for a read (`is_read`) or a write: the rule the HTTP transport's host
/// failover follows too.
pub(crate) fn repeatable(is_read: bool, error: &Error) -> bool {
    match error {
        Error::Connect { .. } => true,
        Error::Timeout { .. } | Error::Transport { .. } => is_read,
        Error::Api { kind, .. } => {
            is_read && matches!(kind, ApiErrorKind::Server | ApiErrorKind::ProxyUnreachable)
        }
        _ => false,
    }
}

/// A transport whose failed calls are tried again, up to `rounds` more times, waiting `backoff`
/// before the first repeat and twice as long before each further one (at most 30 s).
#[derive(Debug)]
pub struct Retry<T> {
    inner: T,
    rounds: u32,
    backoff: Duration,
}

impl<T> Retry<T> {
    /// Wraps `inner`: at most `rounds` repeats of a call, the first after `backoff`.
    pub fn new(inner: T, rounds: u32, backoff: Duration) -> Self {
        Self {
            inner,
            rounds,
            backoff,
        }
    }

    /// The transport it wraps.
    pub fn inner(&self) -> &T {
        &self.inner
    }
}

#[async_trait]
impl<T: Transport> Transport for Retry<T> {
    async fn send(&self, request: Request) -> Result<Data> {
        let mut round = 0;
        loop {
            match self.inner.send(request.clone()).await {
                Err(error) if round < self.rounds && worth_repeating(&request, &error) => {
                    let wait = self
                        .backoff
                        .saturating_mul(1 << round.min(16))
                        .min(MAX_BACKOFF);
                    round += 1;
                    tracing::debug!(
                        endpoint = request.endpoint,
                        round,
                        ?wait,
                        %error,
                        "retrying after backoff"
                    );
                    tokio::time::sleep(wait).await;
                }
                answer => return answer,
            }
        }
    }

    fn server_time(&self) -> Option<i64> {
        self.inner.server_time()
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic: unwrapping is how they fail.
    #![allow(clippy::unwrap_used)]

    use std::sync::Mutex;

    use super::*;

    /// Fails with the given errors in turn, then answers `1`; counts the calls.
    struct Flaky {
        errors: Mutex<Vec<Error>>,
        calls: Mutex<u32>,
    }

    impl Flaky {
        fn new(mut errors: Vec<Error>) -> Self {
            errors.reverse();
            Self {
                errors: Mutex::new(errors),
                calls: Mutex::new(0),
            }
        }

        fn calls(&self) -> u32 {
            *self.calls.lock().unwrap()
        }
    }

    #[async_trait]
    impl Transport for Flaky {
        async fn send(&self, _request: Request) -> Result<Data> {
            *self.calls.lock().unwrap() += 1;
            match self.errors.lock().unwrap().pop() {
                Some(e) => Err(e),
                None => Ok(serde_json::value::RawValue::from_string("1".into()).unwrap()),
            }
        }
    }

    fn refused() -> Error {
        Error::Connect {
            host: "pve1:8006".into(),
            message: "connection refused".into(),
        }
    }

    fn timeout() -> Error {
        Error::Timeout {
            method: "GET".into(),
            endpoint: "/version".into(),
            host: "pve1:8006".into(),
        }
    }

    fn read() -> Request {
        Request::new(crate::endpoint!(GET "/version"), "/version".into())
    }

    fn write() -> Request {
        Request::new(
            crate::endpoint!(POST "/nodes/{node}/qemu/{vmid}/migrate"),
            "/nodes/a/qemu/101/migrate".into(),
        )
    }

    #[tokio::test(start_paused = true)]
    async fn a_refused_connection_is_repeated_with_doubling_backoff_then_given_up() {
        let t = Retry::new(
            Flaky::new(vec![refused(), refused(), refused(), refused()]),
            2,
            Duration::from_millis(250),
        );
        let start = tokio::time::Instant::now();
        let e = t.send(write()).await.unwrap_err();
        assert!(matches!(e, Error::Connect { .. }), "{e:?}");
        assert_eq!(t.inner().calls(), 3);
        assert_eq!(start.elapsed(), Duration::from_millis(250 + 500));
    }

    #[tokio::test(start_paused = true)]
    async fn a_read_that_timed_out_is_repeated_and_answers() {
        let t = Retry::new(Flaky::new(vec![timeout()]), 2, Duration::from_millis(10));
        assert_eq!(t.send(read()).await.unwrap().get(), "1");
        assert_eq!(t.inner().calls(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_that_may_have_reached_proxmox_is_never_repeated() {
        let t = Retry::new(Flaky::new(vec![timeout()]), 2, Duration::from_millis(10));
        assert!(matches!(t.send(write()).await, Err(Error::Timeout { .. })));
        assert_eq!(t.inner().calls(), 1);
    }

    #[test]
    fn what_is_worth_repeating() {
        let server = crate::api_error("GET", "/version", 500, "boom", b"");
        let tls = Error::Tls {
            host: "pve1:8006".into(),
            message: "certificate refused".into(),
        };
        assert!(worth_repeating(&read(), &server));
        assert!(!worth_repeating(&write(), &server));
        assert!(worth_repeating(&write(), &refused()));
        assert!(!worth_repeating(&read(), &tls));
        let denied = crate::api_error("GET", "/version", 403, "denied", b"");
        assert!(!worth_repeating(&read(), &denied));
    }
}
