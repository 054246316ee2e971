//! What makes the API's actions safe to repeat: `createVM`'s idempotency keys, and the
//! fingerprint a plan carries of the cluster it was made on, which `rebalance` and `evacuate`
//! check before carrying a plan out.

use std::collections::HashMap;
use std::sync::Mutex;

use flxp_core::Cluster;
use tokio::sync::watch;
use tokio::time::{Duration, Instant};

use super::ApiError;
use super::types::Vm;

/// How long `createVM` remembers an idempotency key: a retry within this time gets the first
/// answer; a key older than this is forgotten.
pub const KEY_TTL: Duration = Duration::from_secs(3600);

/// The longest idempotency key accepted.
const KEY_MAX: usize = 128;

/// The answer of one creation, once it is known.
pub type Answer = Option<Result<Vm, ApiError>>;

/// One remembered key.
#[derive(Debug)]
struct Entry {
    /// When it was first used.
    at: Instant,
    /// What it was used for: zone, name and host; the same key for another VM is refused.
    request: String,
    /// The creation's answer, once it ended.
    answer: watch::Receiver<Answer>,
}

/// What a request with an idempotency key is to do.
#[derive(Debug)]
pub enum Claim {
    /// It is the first: create, and send the answer here.
    First(watch::Sender<Answer>),
    /// Another request with the key creates (or created): wait for its answer.
    Wait(watch::Receiver<Answer>),
}

/// The idempotency keys of `createVM`, kept in memory for an hour.
#[derive(Debug)]
pub struct Idempotency {
    ttl: Duration,
    keys: Mutex<HashMap<String, Entry>>,
}

impl Default for Idempotency {
    fn default() -> Self {
        Self::new(KEY_TTL)
    }
}

impl Idempotency {
    /// Keys remembered for `ttl`.
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            keys: Mutex::new(HashMap::new()),
        }
    }

    /// Claims `key` for a creation described by `request` (zone, name, host). Atomic: of any
    /// number of concurrent requests with one key exactly one is `Claim::First`.
    pub fn claim(&self, key: &str, request: &str) -> Result<Claim, ApiError> {
        if key.is_empty() || key.len() > KEY_MAX || key.chars().any(char::is_control) {
            return Err(ApiError::bad_input(format!(
                "idempotencyKey: must be 1 to {KEY_MAX} characters without control characters"
            )));
        }
        let now = Instant::now();
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        let ttl = self.ttl;
        // A creation still running is never forgotten, however long it takes.
        keys.retain(|_, e| now.duration_since(e.at) < ttl || e.answer.borrow().is_none());
        if let Some(e) = keys.get(key) {
            if e.request != request {
                return Err(ApiError::bad_input(format!(
                    "idempotencyKey: {key:?} was used for another VM ({}); use a new key for each VM",
                    e.request
                )));
            }
            return Ok(Claim::Wait(e.answer.clone()));
        }
        let (tx, rx) = watch::channel(None);
        keys.insert(
            key.to_owned(),
            Entry {
                at: now,
                request: request.to_owned(),
                answer: rx,
            },
        );
        Ok(Claim::First(tx))
    }

    /// Forgets `key` (its creation ended without an answer), so a retry creates.
    pub fn forget(&self, key: &str) {
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        keys.remove(key);
    }
}

/// Waits for the answer of the creation that claimed a key first.
pub async fn answer(mut rx: watch::Receiver<Answer>) -> Option<Result<Vm, ApiError>> {
    match rx.wait_for(Option::is_some).await {
        Ok(a) => a.clone(),
        // The creating task ended without an answer (it panicked): the caller retries.
        Err(_) => None,
    }
}

/// A short digest of what a plan depends on: the goal (`balance flxp`, `evacuate pve2`) and the
/// cluster's structure: nodes with their status, maintenance, labels and taints, guests with
/// their node, state, size, tags and lock. Usage figures are left out: they move every second,
/// and the executor replans on the cluster as it is anyway; what they leave out cannot make a
/// plan wrong, only less good.
pub fn fingerprint(goal: &str, cluster: &Cluster) -> String {
    use std::fmt::Write;
    let mut text = format!("{goal}\n");
    for n in cluster.nodes() {
        let _ = writeln!(
            text,
            "node {} {:?} {:?} {:?} {:?} {:?}",
            n.name, n.status, n.maintenance, n.labels, n.taints, n.prefer_no
        );
    }
    let mut guests: Vec<_> = cluster.guests().iter().collect();
    guests.sort_by_key(|g| g.vmid);
    for g in guests {
        let _ = writeln!(
            text,
            "guest {} {} {} {} {} {} {} {:?} {:?} {}",
            g.vmid,
            g.kind.as_str(),
            cluster.node(g.node).name,
            g.running,
            g.template,
            g.maxmem,
            g.maxcpu,
            g.tags,
            g.lock,
            g.migrating.is_some()
        );
    }
    let d = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    d.as_ref()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may panic

    use super::*;
    use async_graphql::ID;

    fn vm(id: &str) -> Vm {
        Vm {
            id: ID(id.into()),
            name: "web".into(),
            host: super::super::types::Host {
                id: ID("pve1".into()),
                name: "pve1".into(),
            },
            zone: "lab".into(),
            warnings: Vec::new(),
        }
    }

    #[tokio::test]
    async fn one_key_is_claimed_once_and_every_claim_gets_the_first_answer() {
        let keys = Idempotency::default();
        let Claim::First(tx) = keys.claim("k1", "lab web").unwrap() else {
            panic!("the first claim must create");
        };
        let Claim::Wait(rx) = keys.claim("k1", "lab web").unwrap() else {
            panic!("a second claim must wait");
        };
        tx.send(Some(Ok(vm("105")))).unwrap();
        assert_eq!(answer(rx).await.unwrap().unwrap().id.0, "105");
        let Claim::Wait(rx) = keys.claim("k1", "lab web").unwrap() else {
            panic!("a later claim must get the answer");
        };
        assert_eq!(answer(rx).await.unwrap().unwrap().id.0, "105");
        let e = keys.claim("k1", "lab db").unwrap_err();
        assert_eq!(
            e.message,
            "idempotencyKey: \"k1\" was used for another VM (lab web); use a new key for each VM"
        );
        assert!(keys.claim("", "lab web").is_err());
        assert!(matches!(
            keys.claim("k2", "lab web").unwrap(),
            Claim::First(_)
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_is_forgotten_after_its_ttl_but_not_while_it_runs() {
        let keys = Idempotency::new(Duration::from_secs(10));
        let Claim::First(tx) = keys.claim("k", "lab web").unwrap() else {
            panic!("first");
        };
        tokio::time::advance(Duration::from_secs(11)).await;
        assert!(matches!(
            keys.claim("k", "lab web").unwrap(),
            Claim::Wait(_)
        ));
        tx.send(Some(Ok(vm("105")))).unwrap();
        assert!(matches!(
            keys.claim("k", "lab web").unwrap(),
            Claim::First(_)
        ));
    }

    #[tokio::test]
    async fn a_creation_that_ended_without_an_answer_lets_a_retry_create() {
        let keys = Idempotency::default();
        let Claim::First(tx) = keys.claim("k", "lab web").unwrap() else {
            panic!("first");
        };
        let Claim::Wait(rx) = keys.claim("k", "lab web").unwrap() else {
            panic!("wait");
        };
        drop(tx);
        keys.forget("k");
        assert!(answer(rx).await.is_none());
        assert!(matches!(
            keys.claim("k", "lab web").unwrap(),
            Claim::First(_)
        ));
    }
}
