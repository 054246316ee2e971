//! A scripted Proxmox API server on `127.0.0.1:0`, HTTP or HTTPS (rcgen certificates).
//!
//! Every request is recorded (method, path, query, auth headers, body) and answered by the test's
//! script, as Proxmox would: `{"data": ...}`, or an error status with its reason phrase and body.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;

use flxp_pve::Fingerprint;

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub query: String,
    pub authorization: Option<String>,
    pub cookie: Option<String>,
    pub csrf: Option<String>,
    pub content_type: Option<String>,
    pub body: String,
}

/// An answer: status, reason phrase, body, and an optional delay before it.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub reason: Option<String>,
    pub body: String,
    pub delay: Duration,
}

impl Reply {
    /// 200 with `{"data": data}`.
    pub fn data(data: serde_json::Value) -> Self {
        Self {
            status: 200,
            reason: None,
            body: serde_json::json!({ "data": data }).to_string(),
            delay: Duration::ZERO,
        }
    }

    /// A Proxmox error: the reason phrase is the message's first line, the body the JSON shape.
    pub fn error(status: u16, message: &str, errors: Option<serde_json::Value>) -> Self {
        let mut body = serde_json::json!({ "data": null, "message": format!("{message}\n") });
        if let Some(e) = errors {
            body["errors"] = e;
        }
        Self {
            status,
            reason: Some(message.lines().next().unwrap_or_default().to_owned()),
            body: body.to_string(),
            delay: Duration::ZERO,
        }
    }

    /// Proxmox's 401: reason phrase only, empty body.
    pub fn unauthorized(reason: &str) -> Self {
        Self {
            status: 401,
            reason: Some(reason.to_owned()),
            body: String::new(),
            delay: Duration::ZERO,
        }
    }

    /// A raw answer.
    pub fn raw(status: u16, body: &str) -> Self {
        Self {
            status,
            reason: None,
            body: body.to_owned(),
            delay: Duration::ZERO,
        }
    }

    /// The same answer after a delay.
    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

type Script = dyn Fn(&Seen, usize) -> Reply + Send + Sync;

struct Shared {
    seen: Mutex<Vec<Seen>>,
    script: Box<Script>,
}

/// A running scripted server.
pub struct Server {
    pub port: u16,
    pub fingerprint: Option<Fingerprint>,
    shared: Arc<Shared>,
}

impl Server {
    /// `127.0.0.1:<port>` (with `http://` for a plain server).
    pub fn host(&self) -> String {
        match self.fingerprint {
            Some(_) => format!("127.0.0.1:{}", self.port),
            None => format!("http://127.0.0.1:{}", self.port),
        }
    }

    /// Every request seen so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.shared.seen.lock().unwrap().clone()
    }

    /// How many requests were seen.
    pub fn count(&self) -> usize {
        self.shared.seen.lock().unwrap().len()
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let seen = Seen {
        method: method.to_string(),
        path: uri.path().to_owned(),
        query: uri.query().unwrap_or_default().to_owned(),
        authorization: header("authorization"),
        cookie: header("cookie"),
        csrf: header("csrfpreventiontoken"),
        content_type: header("content-type"),
        body: String::from_utf8_lossy(&body).into_owned(),
    };
    let index = {
        let mut all = shared.seen.lock().unwrap();
        all.push(seen.clone());
        all.len() - 1
    };
    let reply = (shared.script)(&seen, index);
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let mut response = (
        StatusCode::from_u16(reply.status).unwrap(),
        [("content-type", "application/json;charset=UTF-8")],
        reply.body,
    )
        .into_response();
    if let Some(reason) = reply.reason {
        response
            .extensions_mut()
            .insert(hyper::ext::ReasonPhrase::try_from(reason).unwrap());
    }
    response
}

/// A certificate authority and a server certificate for `localhost`/`127.0.0.1` signed by it.
pub struct Certs {
    pub ca_pem: String,
    pub server_der: Vec<u8>,
    pub server_key_der: Vec<u8>,
}

impl Certs {
    /// A fresh self-signed server certificate (its own issuer), like a default Proxmox node.
    pub fn self_signed() -> Self {
        let key = KeyPair::generate().unwrap();
        let params =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
        let cert = params.self_signed(&key).unwrap();
        Self {
            ca_pem: cert.pem(),
            server_der: cert.der().to_vec(),
            server_key_der: key.serialize_der(),
        }
    }

    /// A CA and a server certificate it signed, like a cluster's `pve-root-ca.pem` and `pve-ssl.pem`.
    pub fn with_ca() -> Self {
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);
        let key = KeyPair::generate().unwrap();
        let params =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
        let cert = params.signed_by(&key, &issuer).unwrap();
        Self {
            ca_pem: ca.pem(),
            server_der: cert.der().to_vec(),
            server_key_der: key.serialize_der(),
        }
    }
}

/// Starts a server; `certs: None` serves plain HTTP.
pub async fn start(
    certs: Option<Certs>,
    script: impl Fn(&Seen, usize) -> Reply + Send + Sync + 'static,
) -> Server {
    let shared = Arc::new(Shared {
        seen: Mutex::new(Vec::new()),
        script: Box::new(script),
    });
    let app = axum::Router::new()
        .fallback(handle)
        .with_state(shared.clone());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (acceptor, fingerprint) = match certs {
        Some(c) => {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let config = rustls::ServerConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(
                    vec![c.server_der.clone().into()],
                    rustls::pki_types::PrivateKeyDer::Pkcs8(c.server_key_der.into()),
                )
                .unwrap();
            (
                Some(TlsAcceptor::from(Arc::new(config))),
                Some(Fingerprint::of_der(&c.server_der)),
            )
        }
        None => (None, None),
    };
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let service = TowerToHyperService::new(app.clone());
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let http = hyper::server::conn::http1::Builder::new();
                match acceptor {
                    Some(a) => {
                        if let Ok(tls) = a.accept(tcp).await {
                            let _ = http.serve_connection(TokioIo::new(tls), service).await;
                        }
                    }
                    None => {
                        let _ = http.serve_connection(TokioIo::new(tcp), service).await;
                    }
                }
            });
        }
    });
    Server {
        port,
        fingerprint,
        shared,
    }
}

/// A port on which nothing listens (bound, then closed): connections are refused.
pub async fn refused_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    l.local_addr().unwrap().port()
}
