//! Webhooks: events (a failed migration, an evacuation that leaves guests, a plan that cannot
//! meet its goal, a node woken or shut down, a maintenance step, the zone's lease taken or lost)
//! POSTed as JSON to the `[[webhook]]`s of the config, from `flxp daemon`, `flxp serve` and the
//! one-off commands alike.
//!
//! Sending never holds up scheduling: [`Notifier::send`] only queues. Each webhook has its own
//! bounded queue and its own task, which retries with a doubling backoff; a full queue drops the
//! event with a warning, so a receiver that fails or hangs delays only its own events. Logs name
//! a webhook by scheme and host only: a chat system's hook URL and the headers hold secrets.
//! [`events`] turns what flxp did into events.

pub mod events;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use crate::config::{Config, WebhookSection};

pub use crate::event::{
    EVACUATION_INCOMPLETE, EVENTS, Event, LEASE_LOST, LEASE_TAKEN, MAINTENANCE_STEP,
    MIGRATION_FAILED, NODE_SHUTDOWN, NODE_WOKEN, PLAN_UNMET,
};
pub use events::RoundWatch;

/// How long a stopping process waits for its webhooks.
pub const FLUSH: Duration = Duration::from_secs(15);

/// What a webhook's task is handed.
enum Msg {
    Event(Box<Event>),
    /// Answered once every event queued before it was dealt with.
    Flush(oneshot::Sender<()>),
}

/// One webhook's queue.
struct Hook {
    events: Vec<String>,
    shown: String,
    tx: mpsc::Sender<Msg>,
}

/// Sends events to the configured webhooks. Cheap to clone; with no webhook it does nothing.
#[derive(Clone, Default)]
pub struct Notifier {
    hooks: Arc<Vec<Hook>>,
    source: Arc<str>,
    dropped: Arc<AtomicU64>,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier")
            .field(
                "webhooks",
                &self.hooks.iter().map(|h| &h.shown).collect::<Vec<_>>(),
            )
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl Notifier {
    /// Starts one task per `[[webhook]]` of `config` on the current Tokio runtime; `source`
    /// names the sender in every event. Without a runtime, or a webhook, nothing is sent.
    pub fn start(config: &Config, source: &str) -> Self {
        Self::start_hooks(&config.webhook, source)
    }

    /// [`Self::start`] for these webhooks.
    pub fn start_hooks(webhooks: &[WebhookSection], source: &str) -> Self {
        let mut hooks = Vec::new();
        if !webhooks.is_empty() && tokio::runtime::Handle::try_current().is_err() {
            tracing::warn!("webhooks: no async runtime, nothing will be sent");
            return Self::default();
        }
        for w in webhooks {
            let client = match reqwest::Client::builder()
                .timeout(Duration::from_secs(w.timeout_secs))
                // Headers may hold credentials: never carried along to another address.
                .redirect(reqwest::redirect::Policy::none())
                .build()
            {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(webhook = %w.shown_url(), error = %e, "webhook disabled: no HTTP client");
                    continue;
                }
            };
            let (tx, rx) = mpsc::channel(w.queue.max(1));
            tokio::spawn(deliver_loop(client, w.clone(), rx));
            hooks.push(Hook {
                events: w.events.clone(),
                shown: w.shown_url(),
                tx,
            });
        }
        Self {
            hooks: Arc::new(hooks),
            source: Arc::from(source),
            dropped: Arc::default(),
        }
    }

    /// Whether any webhook is configured.
    pub fn is_active(&self) -> bool {
        !self.hooks.is_empty()
    }

    /// Events dropped because a webhook's queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Queues `event` for every webhook that wants it; never waits. A full queue drops it for
    /// that webhook, with a warning.
    pub fn send(&self, mut event: Event) {
        if self.hooks.is_empty() {
            return;
        }
        event.source = self.source.to_string();
        for h in self.hooks.iter() {
            if !h.events.is_empty() && !h.events.iter().any(|e| e == event.event) {
                continue;
            }
            match h.tx.try_send(Msg::Event(Box::new(event.clone()))) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(_)) => {
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(webhook = %h.shown, event = event.event, zone = %event.zone, "webhook queue full: event dropped");
                }
                Err(mpsc::error::TrySendError::Closed(_)) => {
                    tracing::warn!(webhook = %h.shown, event = event.event, "webhook task ended: event dropped");
                }
            }
        }
    }

    /// Queues each of `events`.
    pub fn send_all(&self, events: impl IntoIterator<Item = Event>) {
        for e in events {
            self.send(e);
        }
    }

    /// Waits, at most `timeout`, until every event queued so far was sent or given up on: what
    /// a one-off command does before it exits. Whether all were dealt with in time.
    pub async fn flush(&self, timeout: Duration) -> bool {
        let all = async {
            let mut acks = Vec::new();
            for h in self.hooks.iter() {
                let (tx, rx) = oneshot::channel();
                if h.tx.send(Msg::Flush(tx)).await.is_ok() {
                    acks.push(rx);
                }
            }
            for a in acks {
                a.await.ok();
            }
        };
        let done = tokio::time::timeout(timeout, all).await.is_ok();
        if !done {
            tracing::warn!(
                timeout_secs = timeout.as_secs(),
                "webhooks: events still unsent at exit"
            );
        }
        done
    }
}

/// One webhook's task: sends its events one after the other.
async fn deliver_loop(client: reqwest::Client, hook: WebhookSection, mut rx: mpsc::Receiver<Msg>) {
    while let Some(msg) = rx.recv().await {
        match msg {
            Msg::Event(e) => deliver(&client, &hook, &e).await,
            Msg::Flush(ack) => {
                ack.send(()).ok();
            }
        }
    }
}

/// POSTs one event, retrying `retries` times with a doubling backoff; gives up with a warning.
async fn deliver(client: &reqwest::Client, hook: &WebhookSection, event: &Event) {
    let shown = hook.shown_url();
    let mut wait = Duration::from_millis(hook.backoff_ms);
    for attempt in 0..=hook.retries {
        let mut req = client.post(&hook.url).json(event);
        for (k, v) in &hook.headers {
            req = req.header(k, v);
        }
        let why = match req.send().await {
            Ok(r) if r.status().is_success() => {
                tracing::debug!(webhook = %shown, event = event.event, "webhook sent");
                return;
            }
            Ok(r) => format!("HTTP {}", r.status()),
            // Without the URL: reqwest's errors print it, path and all.
            Err(e) => e.without_url().to_string(),
        };
        if attempt == hook.retries {
            tracing::warn!(webhook = %shown, event = event.event, zone = %event.zone, error = %why, attempts = attempt + 1, "webhook failed: event given up");
            return;
        }
        tracing::debug!(webhook = %shown, event = event.event, error = %why, retry_in_ms = wait.as_millis() as u64, "webhook failed: retrying");
        tokio::time::sleep(wait).await;
        wait = wait.saturating_mul(2).min(Duration::from_secs(300));
    }
}

/// Sends `events` from a one-off command and waits for them (at most
/// [`crate::notify::FLUSH`]): the process is about to end. Call on the command's runtime.
pub async fn send_once(config: &Config, source: &str, events: Vec<Event>) {
    if config.webhook.is_empty() || events.is_empty() {
        return;
    }
    let n = Notifier::start(config, source);
    n.send_all(events);
    n.flush(FLUSH).await;
}
