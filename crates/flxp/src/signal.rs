//! The stop signals every long-running command honours: Ctrl-C (SIGINT) and SIGTERM, which
//! systemd, `timeout` and CI runners send.

/// Listeners for the stop signals, registered once, so that a signal arriving between two waits
/// is never lost: "signal again to quit" must work however quickly the second signal follows.
pub struct StopSignals {
    #[cfg(unix)]
    listeners: Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>,
}

impl StopSignals {
    /// Starts listening for SIGINT and SIGTERM now.
    pub fn listen() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            match (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
            ) {
                (Ok(int), Ok(term)) => Self {
                    listeners: Some((int, term)),
                },
                (Err(e), _) | (_, Err(e)) => {
                    tracing::warn!(error = %e, "cannot listen for stop signals; they act as the system's default");
                    Self { listeners: None }
                }
            }
        }
        #[cfg(not(unix))]
        Self {}
    }

    /// Resolves when the next SIGINT or SIGTERM arrives (or one that arrived since the last call).
    pub async fn next(&mut self) {
        #[cfg(unix)]
        match &mut self.listeners {
            Some((int, term)) => {
                tokio::select! {
                    _ = int.recv() => {},
                    _ = term.recv() => {},
                }
            }
            None => std::future::pending::<()>().await,
        }
        #[cfg(not(unix))]
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Resolves when SIGINT or SIGTERM arrives.
pub async fn stop_requested() {
    StopSignals::listen().next().await;
}
