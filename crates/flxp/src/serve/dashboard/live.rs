//! Live progress of the plans `flxp serve` carries out, for the dashboard: every executor event
//! (migration started, advanced, done, failed, skipped, replanned) and the start and end of each
//! run go to a broadcast channel, and `GET /events` streams them as server-sent events.
//!
//! The stream needs the bearer token like the API: the page reads it with `fetch`, which can send
//! the `Authorization` header (an `EventSource` cannot, and a token in the URL would end up in
//! logs and history).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use flxp_engine::{Event, Progress};
use futures_util::Stream;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::serve::metrics::MigrationMeter;

/// Events kept for slow readers; one that falls further behind is told how many it missed.
const BACKLOG: usize = 1024;

/// The broadcast of live events, as JSON documents.
#[derive(Debug)]
pub struct Live {
    tx: broadcast::Sender<Arc<Value>>,
}

impl Default for Live {
    fn default() -> Self {
        Self {
            tx: broadcast::Sender::new(BACKLOG),
        }
    }
}

impl Live {
    /// Sends one event to every reader (none listening is fine).
    pub fn send(&self, event: Value) {
        let _ = self.tx.send(Arc::new(event));
    }

    /// A run started: its zone, goal and planned migrations.
    pub fn run_started(&self, zone: &str, goal: &str, migrations: usize) {
        self.send(
            json!({ "event": "run-started", "zone": zone, "goal": goal, "migrations": migrations }),
        );
    }

    /// A run ended, with how many migrations were done and failed.
    pub fn run_ended(&self, zone: &str, goal: &str, done: usize, failed: usize) {
        self.send(json!({ "event": "run-ended", "zone": zone, "goal": goal, "done": done, "failed": failed }));
    }

    /// The server-sent-events stream of everything sent from now on.
    pub fn stream(&self) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>> + use<>> {
        let rx = self.tx.subscribe();
        let events = futures_util::stream::unfold(rx, |mut rx| async move {
            let event = match rx.recv().await {
                Ok(v) => SseEvent::default().data(v.to_string()),
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    SseEvent::default().data(json!({ "event": "lagged", "missed": n }).to_string())
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            };
            Some((Ok(event), rx))
        });
        // Proxies close idle connections; a comment every 15 s keeps the stream open.
        Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
    }
}

/// The progress of a run: counted in the metrics and sent live.
pub struct LiveProgress {
    /// The metrics' counter of migrations.
    pub meter: MigrationMeter,
    /// Where events go.
    pub live: Arc<Live>,
}

impl Progress for LiveProgress {
    fn event(&self, event: &Event) {
        self.meter.event(event);
        if let Ok(v) = serde_json::to_value(event) {
            self.live.send(v);
        }
    }

    fn wants_fractions(&self) -> bool {
        // The page shows each migration's bar move; one task-log read per poll is the price.
        true
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may panic

    use super::*;

    #[tokio::test]
    async fn events_reach_every_reader_as_json() {
        let live = Arc::new(Live::default());
        let mut rx = live.tx.subscribe();
        let p = LiveProgress {
            meter: MigrationMeter(Arc::new(crate::serve::metrics::Metrics::new())),
            live: Arc::clone(&live),
        };
        p.event(&Event::Progress {
            zone: "eu".into(),
            vmid: 101,
            fraction: 0.5,
        });
        live.run_ended("eu", "balance", 1, 0);
        let first = rx.recv().await.unwrap();
        assert_eq!(first["event"], "progress");
        assert_eq!(first["vmid"], 101);
        let second = rx.recv().await.unwrap();
        assert_eq!(second["event"], "run-ended");
        assert_eq!(second["done"], 1);
    }
}
