//! Serving the simulated API: plain HTTP or HTTPS (HTTP/1.1, as pveproxy), with graceful
//! shutdown. [`serve`] runs until the listener fails; [`SimHandle::spawn`] runs in the
//! background and can be shut down (what tests and `flxp serve` use).

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::tls::TlsIdentity;
use crate::{Result, Sim};

/// Serves `sim` over plain HTTP on `listener` until accepting fails.
pub async fn serve(listener: TcpListener, sim: Sim) -> Result<()> {
    run(listener, sim, None, std::future::pending()).await
}

/// Serves `sim` over HTTPS with `identity` until accepting fails.
pub async fn serve_tls(listener: TcpListener, sim: Sim, identity: &TlsIdentity) -> Result<()> {
    sim.set_fingerprint(identity.fingerprint());
    let acceptor = TlsAcceptor::from(identity.server_config()?);
    run(listener, sim, Some(acceptor), std::future::pending()).await
}

/// Serves until `shutdown` resolves, then lets open connections finish (up to 5 s).
pub async fn run(
    listener: TcpListener,
    sim: Sim,
    tls: Option<TlsAcceptor>,
    shutdown: impl Future<Output = ()>,
) -> Result<()> {
    let router = sim.router();
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Per-connection errors (too many open files, aborted handshakes) must not
                        // stop the server; back off briefly instead.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let service = TowerToHyperService::new(router.clone());
                let watcher = graceful.watcher();
                let tls = tls.clone();
                tokio::spawn(async move {
                    let builder = hyper::server::conn::http1::Builder::new();
                    let result = match tls {
                        Some(acceptor) => match acceptor.accept(stream).await {
                            Ok(s) => watcher.watch(builder.serve_connection(TokioIo::new(s), service)).await,
                            Err(e) => {
                                tracing::debug!(%peer, error = %e, "TLS handshake failed");
                                return;
                            }
                        },
                        None => watcher.watch(builder.serve_connection(TokioIo::new(stream), service)).await,
                    };
                    if let Err(e) = result {
                        tracing::trace!(%peer, error = %e, "connection ended with an error");
                    }
                });
            }
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    if tokio::time::timeout(Duration::from_secs(5), graceful.shutdown())
        .await
        .is_err()
    {
        tracing::debug!("connections still open after 5 s; closing them");
    }
    Ok(())
}

/// A simulator server running in the background.
#[derive(Debug)]
pub struct SimHandle {
    addr: SocketAddr,
    tls: bool,
    fingerprint: Option<String>,
    stop: watch::Sender<bool>,
    join: JoinHandle<Result<()>>,
    sim: Sim,
}

impl SimHandle {
    /// Starts serving `sim` on `listener` (HTTPS when `tls` is given) in the background.
    pub fn spawn(listener: TcpListener, sim: Sim, tls: Option<&TlsIdentity>) -> Result<Self> {
        let addr = listener.local_addr()?;
        let (stop, mut stopped) = watch::channel(false);
        let acceptor = match tls {
            Some(id) => {
                sim.set_fingerprint(id.fingerprint());
                Some(TlsAcceptor::from(id.server_config()?))
            }
            None => None,
        };
        let fingerprint = tls.map(TlsIdentity::fingerprint);
        let tls_on = acceptor.is_some();
        let server_sim = sim.clone();
        let join = tokio::spawn(async move {
            run(listener, server_sim, acceptor, async move {
                let _ = stopped.wait_for(|s| *s).await;
            })
            .await
        });
        Ok(SimHandle {
            addr,
            tls: tls_on,
            fingerprint,
            stop,
            join,
            sim,
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http(s)://<addr>/api2/json`.
    pub fn base_url(&self) -> String {
        format!("{}/api2/json", self.origin())
    }

    /// `http(s)://<addr>`.
    pub fn origin(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// The certificate fingerprint, when serving HTTPS.
    pub fn fingerprint(&self) -> Option<&str> {
        self.fingerprint.as_deref()
    }

    /// The simulated cluster it serves.
    pub fn sim(&self) -> &Sim {
        &self.sim
    }

    /// Stops accepting, lets open requests finish, and waits for the server to end.
    pub async fn shutdown(self) -> Result<()> {
        let _ = self.stop.send(true);
        match self.join.await {
            Ok(r) => r,
            Err(e) => Err(crate::Error::Io(std::io::Error::other(e.to_string()))),
        }
    }
}
