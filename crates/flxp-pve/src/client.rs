//! The HTTP client: one call = pick a host, authenticate, send, read Proxmox's envelope.
//!
//! Failover and retries follow one rule ([`crate::retry::worth_repeating`]): a request is repeated
//! only when repeating cannot do a second write. Connection and TLS failures happen before
//! anything is sent, so every method moves on to the next host (and, after a round over all
//! hosts, the [`Retry`] layer tries again with backoff, unless a certificate was refused). Reads
//! (GET) are also repeated on timeouts, broken connections and 5xx/59x answers. A write that may
//! have reached Proxmox is never repeated: its timeout or error is returned as is.

use std::fmt;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

use async_trait::async_trait;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, COOKIE, DATE, HeaderValue};
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use tokio::sync::Mutex;
use tokio::time::{Duration, Instant};

use crate::auth::{Credentials, TICKET_LIFETIME, Ticket};
use crate::error::{ApiErrorKind, Error, Result, api_error};
use crate::host::Host;
use crate::logged::Logged;
use crate::pve::Pve;
use crate::request::{Method, Request};
use crate::retry::{Retry, repeatable};
use crate::tls::{TlsTrust, client_config};
use crate::transport::{Data, Transport};
use crate::types::{TicketRequest, TicketResponse, form};

/// The login endpoint; a 401 from it means wrong credentials, not an outdated ticket.
const LOGIN_PATH: &str = "/access/ticket";

/// Settings of a [`Client`]; start with [`ClientBuilder::new`].
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    hosts: Vec<Host>,
    credentials: Credentials,
    trust: TlsTrust,
    connect_timeout: Duration,
    timeout: Duration,
    retries: u32,
    backoff: Duration,
    renew_after: Duration,
}

impl ClientBuilder {
    /// A builder for these API hosts (tried in order) and credentials, with default settings:
    /// web-root TLS trust, 5 s connect timeout, 30 s request timeout, 2 retry rounds with 250 ms
    /// initial backoff, ticket renewal after 90 minutes.
    pub fn new(hosts: Vec<Host>, credentials: Credentials) -> Self {
        Self {
            hosts,
            credentials,
            trust: TlsTrust::WebRoots,
            connect_timeout: Duration::from_secs(5),
            timeout: Duration::from_secs(30),
            retries: 2,
            backoff: Duration::from_millis(250),
            // Proxmox tickets live 2 h; renewing at 90 min leaves room for clock skew and slow calls.
            renew_after: TICKET_LIFETIME - Duration::from_secs(30 * 60),
        }
    }

    /// How server certificates are trusted.
    pub fn trust(mut self, trust: TlsTrust) -> Self {
        self.trust = trust;
        self
    }

    /// Time allowed to open a connection (TCP and TLS).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Time allowed for a whole request, answer included.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Extra rounds over all hosts after the first, for retryable failures.
    pub fn retries(mut self, retries: u32) -> Self {
        self.retries = retries;
        self
    }

    /// Wait before the first retry round; doubled each further round (capped at 30 s).
    pub fn backoff(mut self, backoff: Duration) -> Self {
        self.backoff = backoff;
        self
    }

    /// Age after which a login ticket is renewed before use (must be under its 2 hours).
    pub fn ticket_renew_after(mut self, age: Duration) -> Self {
        self.renew_after = age.min(TICKET_LIFETIME);
        self
    }

    /// Builds the client. Fails on no hosts or an unusable TLS setup.
    pub fn build(self) -> Result<Client> {
        if self.hosts.is_empty() {
            return Err(Error::Config {
                key: "hosts".into(),
                message: "at least one API host is needed".into(),
            });
        }
        for host in self.hosts.iter().filter(|h| h.scheme == "http") {
            tracing::warn!(%host, "plain HTTP to the API: credentials travel unencrypted (meant for the simulator only)");
        }
        let tls = client_config(&self.trust)?;
        let http = reqwest::Client::builder()
            .use_preconfigured_tls(tls)
            .connect_timeout(self.connect_timeout)
            .timeout(self.timeout)
            .user_agent(concat!("flxp/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| Error::Config {
                key: "tls".into(),
                message: e.to_string(),
            })?;
        let https = HttpTransport {
            http,
            hosts: self.hosts,
            preferred: AtomicUsize::new(0),
            server_time: AtomicI64::new(0),
            credentials: self.credentials,
            ticket: Mutex::new(None),
            renew_after: self.renew_after,
        };
        Ok(Pve::typed(Logged::new(Retry::new(
            https,
            self.retries,
            self.backoff,
        ))))
    }
}

/// A Proxmox VE API client over HTTPS, failed calls repeated where that is safe ([`Retry`]),
/// each call logged once ([`Logged`]); cheap to clone (clones share connections and the ticket).
pub type Client = Pve<Logged<Retry<HttpTransport>>>;

/// The [`Transport`] over HTTPS behind a [`Client`]: auth and host failover.
///
/// Failover lives here rather than in a layer: which host to try next, whether a connection (not
/// Proxmox) failed, and whether a ticket must be renewed first are facts of HTTP to a set of
/// hosts that another transport does not have. Each call tries every host once; the [`Retry`]
/// layer around it adds rounds, [`Logged`] logs each call once, and other layers (metrics) wrap
/// them all.
pub struct HttpTransport {
    http: reqwest::Client,
    hosts: Vec<Host>,
    /// Index of the host that answered last: tried first next time.
    preferred: AtomicUsize,
    /// Epoch seconds of the last answer's `Date` header; 0 before any.
    server_time: AtomicI64,
    credentials: Credentials,
    ticket: Mutex<Option<Ticket>>,
    renew_after: Duration,
}

impl fmt::Debug for HttpTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("hosts", &self.hosts)
            .field("credentials", &self.credentials)
            .finish_non_exhaustive()
    }
}

/// One failed attempt, and whether the request may have reached Proxmox.
struct Failed {
    error: Error,
    sent: bool,
}

/// How a call authenticates.
enum Auth {
    /// No credentials (the login call itself).
    None,
    /// The client's credentials.
    Client,
}

impl Client {
    /// The HTTPS transport below the layers.
    fn https(&self) -> &HttpTransport {
        self.transport().inner().inner()
    }

    /// The configured API hosts, in failover order.
    pub fn hosts(&self) -> &[Host] {
        &self.https().hosts
    }

    /// The host that answered last (tried first by the next call).
    pub fn preferred_host(&self) -> &Host {
        self.https().preferred_host()
    }
}

#[async_trait]
impl Transport for HttpTransport {
    async fn send(&self, request: Request) -> Result<Data> {
        let Request {
            method,
            path,
            params,
            ..
        } = request;
        self.call(method, &path, params).await
    }

    /// The cluster's clock from the last answer's `Date` header, if any answer carried one.
    fn server_time(&self) -> Option<i64> {
        Some(self.server_time.load(Ordering::Relaxed)).filter(|&t| t > 0)
    }
}

impl HttpTransport {
    /// The host that answered last (tried first by the next call).
    pub fn preferred_host(&self) -> &Host {
        let i = self.preferred.load(Ordering::Relaxed) % self.hosts.len();
        &self.hosts[i]
    }

    /// Calls one endpoint and returns its `data` as JSON text. `params` is form-encoded: a query string for
    /// GET and DELETE, the body for POST and PUT.
    async fn call(&self, method: Method, path: &str, params: Option<String>) -> Result<Data> {
        let body = match self
            .execute(&method, path, params.as_deref(), Auth::Client)
            .await
        {
            // A ticket may be revoked or outlived early (server restart, clock skew): log in
            // again once. A 401 means Proxmox did nothing, so even a write may be repeated.
            Err(Error::Api {
                kind: ApiErrorKind::AuthFailed,
                endpoint,
                ..
            }) if endpoint != LOGIN_PATH
                && matches!(self.credentials, Credentials::Password { .. }) =>
            {
                tracing::debug!(path, "401 with a ticket: logging in again");
                *self.ticket.lock().await = None;
                self.execute(&method, path, params.as_deref(), Auth::Client)
                    .await?
            }
            other => other?,
        };
        data_of(path, &body)
    }

    /// Sends one request, failing over to each host in turn; returns the body of a 2xx answer.
    /// Rounds after a failed one are the [`Retry`] layer's.
    async fn execute(
        &self,
        method: &Method,
        path: &str,
        params: Option<&str>,
        auth: Auth,
    ) -> Result<Vec<u8>> {
        let hosts = self.hosts.len();
        let is_read = method.is_read();
        // The same headers for every host. Logging in (if due) comes first: the login fails
        // over by itself and leaves the working host preferred, so the call does not knock on a
        // dead host again; a failed login is returned as it is.
        let headers = match auth {
            Auth::Client => Box::pin(self.auth_headers(method)).await?,
            Auth::None => Vec::new(),
        };
        let start = self.preferred.load(Ordering::Relaxed);
        let mut last = None;
        for step in 0..hosts {
            let index = (start + step) % hosts;
            match self.attempt(index, method, path, params, &headers).await {
                Ok(body) => {
                    self.preferred.store(index, Ordering::Relaxed);
                    return Ok(body);
                }
                Err(Failed { error, sent }) => {
                    if sent && !repeatable(is_read, &error) {
                        return Err(error);
                    }
                    tracing::warn!(
                        host = %self.hosts[index],
                        %method,
                        path,
                        error = %error,
                        "API call failed on this host"
                    );
                    // A refused certificate is the failure to report: the [`Retry`] layer
                    // does not repeat it, since it will be refused again.
                    if !matches!(last, Some(Error::Tls { .. })) {
                        last = Some(error);
                    }
                }
            }
        }
        Err(last.unwrap_or_else(|| Error::Config {
            key: "hosts".into(),
            message: "no API host configured".into(),
        }))
    }

    /// One request to one host.
    async fn attempt(
        &self,
        index: usize,
        method: &Method,
        path: &str,
        params: Option<&str>,
        headers: &[(reqwest::header::HeaderName, HeaderValue)],
    ) -> std::result::Result<Vec<u8>, Failed> {
        let host = &self.hosts[index];
        let mut url = format!("{}{}", host.base_url(), path);
        let in_query = method.params_in_query();
        if let Some(p) = params.filter(|p| in_query && !p.is_empty()) {
            url.push('?');
            url.push_str(p);
        }
        let mut request = self.http.request(reqwest::Method::from(*method), url);
        for (name, value) in headers {
            request = request.header(name, value.clone());
        }
        if let Some(p) = params.filter(|_| !in_query) {
            request = request
                .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(p.to_owned());
        }
        tracing::trace!(%host, %method, path, "API request");
        let response = request
            .send()
            .await
            .map_err(|e| send_failure(e, method, path, host))?;
        let status = response.status();
        if let Some(t) = response
            .headers()
            .get(DATE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| httpdate::parse_http_date(v).ok())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .and_then(|d| i64::try_from(d.as_secs()).ok())
        {
            self.server_time.store(t, Ordering::Relaxed);
        }
        let reason = response
            .extensions()
            .get::<hyper::ext::ReasonPhrase>()
            .map(|r| String::from_utf8_lossy(r.as_bytes()).into_owned())
            .or_else(|| status.canonical_reason().map(str::to_owned))
            .unwrap_or_default();
        let body = response.bytes().await.map_err(|e| Failed {
            error: transport_error(&e, method, path, host),
            sent: true,
        })?;
        tracing::trace!(%host, %method, path, status = status.as_u16(), "API answer");
        if status.is_success() {
            Ok(body.to_vec())
        } else {
            Err(Failed {
                error: api_error(method.as_str(), path, status.as_u16(), &reason, &body),
                sent: true,
            })
        }
    }

    /// The auth headers of one request: the token, or the ticket cookie (plus CSRF on writes).
    async fn auth_headers(
        &self,
        method: &Method,
    ) -> Result<Vec<(reqwest::header::HeaderName, HeaderValue)>> {
        let sensitive = |name: &str, v: &str| {
            let mut value = HeaderValue::from_str(v).map_err(|_| Error::Config {
                key: name.to_owned(),
                message: "holds characters not allowed in an HTTP header".into(),
            })?;
            value.set_sensitive(true);
            Ok::<_, Error>(value)
        };
        if let Some(token) = self.credentials.token_header() {
            return Ok(vec![(AUTHORIZATION, sensitive("token", token.expose())?)]);
        }
        let ticket = self.ticket().await?;
        let mut headers = vec![(
            COOKIE,
            sensitive(
                "ticket",
                &format!("PVEAuthCookie={}", ticket.ticket.expose()),
            )?,
        )];
        if !method.is_read() {
            headers.push((
                reqwest::header::HeaderName::from_static("csrfpreventiontoken"),
                sensitive("CSRFPreventionToken", ticket.csrf.expose())?,
            ));
        }
        Ok(headers)
    }

    /// A valid ticket: the current one, or a new login when there is none or it is due.
    async fn ticket(&self) -> Result<Ticket> {
        let Credentials::Password { username, password } = &self.credentials else {
            return Err(Error::Config {
                key: "user".into(),
                message: "a ticket needs user and password credentials".into(),
            });
        };
        // Holding the lock through the login makes concurrent calls wait for one login.
        let mut slot = self.ticket.lock().await;
        if let Some(t) = slot.as_ref().filter(|t| !t.is_due(self.renew_after)) {
            return Ok(t.clone());
        }
        let request = TicketRequest {
            username: username.clone(),
            password: password.clone(),
            realm: None,
            otp: None,
        };
        let path = LOGIN_PATH;
        let body = form::to_form(&request).map_err(|e| Error::Request {
            endpoint: path.into(),
            message: e.to_string(),
        })?;
        // Boxed: login runs through `execute`, which may call back here (for other requests).
        let answer = Box::pin(self.execute(&Method::Post, path, Some(&body), Auth::None)).await?;
        let response: TicketResponse = decode(path, &answer)?;
        if response.need_tfa == Some(true) {
            return Err(Error::Config {
                key: "user".into(),
                message:
                    "the account needs a second factor, which flxp cannot give: use an API token"
                        .into(),
            });
        }
        let (Some(ticket), Some(csrf)) = (response.ticket, response.csrf_prevention_token) else {
            return Err(Error::BadResponse {
                endpoint: path.into(),
                message: "the answer lacks ticket or CSRFPreventionToken".into(),
            });
        };
        tracing::debug!(user = %username, "logged in for a ticket");
        let fresh = Ticket {
            ticket,
            csrf,
            obtained: Instant::now(),
        };
        *slot = Some(fresh.clone());
        Ok(fresh)
    }
}

/// Reads Proxmox's `{"data": ...}` envelope; errors name the endpoint and the JSON path.
fn decode<T: DeserializeOwned>(path: &str, body: &[u8]) -> Result<T> {
    #[derive(serde::Deserialize)]
    struct Envelope<T> {
        data: T,
    }
    // One plain pass for the common case; a body that fails is parsed again to name the path.
    if let Ok(envelope) = serde_json::from_slice::<Envelope<T>>(body) {
        return Ok(envelope.data);
    }
    let de = &mut serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize::<_, Envelope<T>>(de)
        .map(|e| e.data)
        .map_err(|e| Error::BadResponse {
            endpoint: path.to_owned(),
            message: e.to_string(),
        })
}

/// The `data` of a body as JSON text: one validating scan, no tree (the typed endpoints decode
/// it in one pass). A missing or `null` one reads as `null`.
fn data_of(path: &str, body: &[u8]) -> Result<Data> {
    decode::<Option<Data>>(path, body).map(|data| data.unwrap_or_else(|| RawValue::NULL.to_owned()))
}

/// Sorts a failed send into "nothing sent" (connect, TLS) and "maybe sent" (timeout, broken).
fn send_failure(e: reqwest::Error, method: &Method, path: &str, host: &Host) -> Failed {
    if e.is_connect() {
        let error = match tls_cause(&e) {
            Some(message) => Error::Tls {
                host: host.to_string(),
                message,
            },
            None => Error::Connect {
                host: host.to_string(),
                message: cause_chain(&e),
            },
        };
        return Failed { error, sent: false };
    }
    Failed {
        error: transport_error(&e, method, path, host),
        sent: true,
    }
}

fn transport_error(e: &reqwest::Error, method: &Method, path: &str, host: &Host) -> Error {
    if e.is_timeout() {
        Error::Timeout {
            method: method.to_string(),
            endpoint: path.to_owned(),
            host: host.to_string(),
        }
    } else {
        Error::Transport {
            method: method.to_string(),
            endpoint: path.to_owned(),
            host: host.to_string(),
            message: cause_chain(e),
        }
    }
}

/// The rustls error inside a connect failure, if the handshake is what failed.
fn tls_cause(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut current = Some(e);
    while let Some(err) = current {
        if let Some(tls) = err.downcast_ref::<rustls::Error>() {
            return Some(tls.to_string());
        }
        // io::Error's `source()` skips its payload (it returns the payload's source), and TLS
        // layers wrap rustls errors in io::Errors, sometimes twice: step into the payload.
        current = match err
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => err.source(),
        };
    }
    None
}

/// The causes of an error below reqwest's own line (which repeats the URL), joined with `: `.
fn cause_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = Vec::new();
    let mut current = e.source();
    while let Some(err) = current {
        parts.push(err.to_string());
        current = err.source();
    }
    if parts.is_empty() {
        e.to_string()
    } else {
        parts.join(": ")
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic on malformed fixtures: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn data_is_taken_out_of_the_envelope_as_text() {
        let body = br#"{"data": [{"id": "node/pve1", "maxmem": 17179869184}], "total": 1}"#;
        assert_eq!(
            data_of("/cluster/resources", body).unwrap().get(),
            r#"[{"id": "node/pve1", "maxmem": 17179869184}]"#
        );
        assert_eq!(data_of("/x", br#"{"data": null}"#).unwrap().get(), "null");
        assert_eq!(data_of("/x", b"{}").unwrap().get(), "null");
        let e = data_of("/version", b"<html>proxy error</html>").unwrap_err();
        assert!(
            matches!(&e, Error::BadResponse { endpoint, .. } if endpoint == "/version"),
            "{e:?}"
        );
    }
}
