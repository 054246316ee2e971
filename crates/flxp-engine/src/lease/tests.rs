//! The lease's pure rules, and two keepers racing over an in-memory node config under paused time.
// Tests may panic on malformed fixtures: that is the failure report.
#![allow(clippy::unwrap_used)]
// Route handlers answer with `flxp_pve::Error`, as the HTTP transport does; its size is its own.
#![allow(clippy::result_large_err)]

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use flxp_pve::{Captures, Data, Request, Router, Transport, reply};

use super::*;

const MARGIN: Duration = Duration::from_secs(5);

fn record(holder: &str, expires: i64) -> LeaseRecord {
    LeaseRecord {
        zone: "lab".into(),
        holder: holder.into(),
        expires,
        command: None,
        pidns: None,
    }
}

#[test]
fn a_lease_line_round_trips_and_other_lines_are_kept() {
    let r = record("h1:42:abc", 1_000);
    assert_eq!(
        r.line(),
        "<!-- flxp-lease zone=lab holder=h1:42:abc expires=1000 -->"
    );
    assert_eq!(LeaseRecord::parse_line(&r.line()), Some(r.clone()));
    let notes = "flxp.label.ssd\n<!-- flxp-lease zone=other holder=x expires=5 -->";
    // One lease per cluster: taking it replaces a line another zone name wrote.
    let written = rewrite(notes, Some(&r));
    assert_eq!(find(&written, "h1:42:abc"), Some(r.clone()));
    assert_eq!(written.matches("flxp-lease").count(), 1, "{written}");
    assert!(written.starts_with("flxp.label.ssd\n"));
    // Renewal replaces the line, never adds a second one.
    let renewed = rewrite(&written, Some(&record("h1:42:abc", 2_000)));
    assert_eq!(renewed.matches("zone=lab").count(), 1);
    assert_eq!(rewrite(&renewed, None).matches("flxp-lease").count(), 0);
    // The command holding it rides along; a line without one (older flxp) still reads.
    let served = LeaseRecord {
        command: Some("serve".into()),
        ..r.clone()
    };
    assert_eq!(
        served.line(),
        "<!-- flxp-lease zone=lab holder=h1:42:abc expires=1000 command=serve -->"
    );
    assert_eq!(
        LeaseRecord::parse_line(&served.line()),
        Some(served.clone())
    );
    // So does the holder's pid space, which lets a flxp on its host see that it died.
    let spaced = LeaseRecord {
        pidns: Some("4026531836@6c1b".into()),
        ..served
    };
    assert_eq!(
        spaced.line(),
        "<!-- flxp-lease zone=lab holder=h1:42:abc expires=1000 command=serve \
         pidns=4026531836@6c1b -->"
    );
    assert_eq!(LeaseRecord::parse_line(&spaced.line()), Some(spaced));
    for bad in [
        "<!-- a comment -->",
        "<!-- flxp-lease zone=lab holder=x -->",
        "<!-- flxp-lease zone=lab holder=x expires=soon -->",
        "flxp-lease zone=lab holder=x expires=5",
    ] {
        assert_eq!(LeaseRecord::parse_line(bad), None, "{bad}");
    }
}

#[test]
fn a_contender_takes_only_past_expiry_plus_margin() {
    let r = record("other", 1_000);
    assert_eq!(judge(None, "me", 0, MARGIN), Verdict::Take);
    assert_eq!(judge(Some(&r), "other", 2_000, MARGIN), Verdict::Renew);
    for now in [900, 1_000, 1_005] {
        assert_eq!(
            judge(Some(&r), "me", now, MARGIN),
            Verdict::Wait {
                holder: "other".into(),
                expires: 1_000,
                command: None,
            },
            "at {now}"
        );
    }
    assert_eq!(judge(Some(&r), "me", 1_006, MARGIN), Verdict::Take);
}

#[tokio::test(start_paused = true)]
async fn a_holder_stops_margin_before_its_lease_ends() {
    let sent = Instant::now();
    let until = valid_until(sent, Duration::from_secs(30), MARGIN);
    assert_eq!(until - sent, Duration::from_secs(25));
    assert_eq!(
        valid_until(sent, Duration::from_secs(3), MARGIN),
        sent,
        "a TTL shorter than the margin is never valid"
    );
}

#[tokio::test(start_paused = true)]
async fn a_ttl_past_what_the_clock_holds_is_a_century_not_a_panic() {
    let sent = Instant::now();
    let until = valid_until(sent, Duration::MAX, MARGIN);
    assert_eq!(until - sent, Duration::from_secs(100 * 365 * 24 * 3600));
}

/// One node's config in memory: notes, digest check, and a Proxmox clock that follows paused
/// tokio time (the daemon's tests keep their lease here too).
pub(crate) struct Node {
    pub(crate) notes: std::sync::Mutex<String>,
    start: Instant,
    epoch: i64,
    down: std::sync::atomic::AtomicBool,
    /// Writes are refused as for a token without `Sys.Modify`.
    denied: std::sync::atomic::AtomicBool,
    writes: AtomicI64,
}

impl Node {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            notes: std::sync::Mutex::new("flxp.label.ssd".into()),
            start: Instant::now(),
            epoch: 1_764_400_000,
            down: false.into(),
            denied: false.into(),
            writes: AtomicI64::new(0),
        })
    }

    fn digest(notes: &str) -> String {
        format!(
            "{:x}",
            notes.len() * 31 + notes.bytes().map(usize::from).sum::<usize>()
        )
    }
}

#[async_trait]
impl Transport for Node {
    async fn send(&self, request: Request) -> flxp_pve::Result<flxp_pve::Data> {
        // Lets two keepers' calls interleave, as two processes' do.
        tokio::task::yield_now().await;
        if self.down.load(Ordering::Relaxed) {
            return Err(flxp_pve::api_error(
                "GET",
                request.endpoint,
                595,
                "no route to host",
                b"",
            ));
        }
        // Anything not routed is a 501 naming the call, as in every other double.
        static ROUTES: OnceLock<Router<Node>> = OnceLock::new();
        ROUTES
            .get_or_init(|| {
                Router::new()
                    .route(
                        flxp_pve::endpoint!(GET "/cluster/status"),
                        Node::cluster_status,
                    )
                    .route(
                        flxp_pve::endpoint!(GET "/nodes/{node}/config"),
                        Node::config,
                    )
                    .route(
                        flxp_pve::endpoint!(PUT "/nodes/{node}/config"),
                        Node::write_config,
                    )
            })
            .handle(self, &request)
    }

    fn server_time(&self) -> Option<i64> {
        let elapsed = i64::try_from(self.start.elapsed().as_secs()).unwrap();
        Some(self.epoch + elapsed)
    }
}

/// The routed endpoints.
impl Node {
    fn cluster_status(&self, _: &Request, _: &Captures) -> flxp_pve::Result<Data> {
        reply(serde_json::json!([
            {"type": "cluster", "name": "lab"},
            {"type": "node", "name": "pve2"},
            {"type": "node", "name": "pve1"}
        ]))
    }

    fn config(&self, request: &Request, _: &Captures) -> flxp_pve::Result<Data> {
        assert_eq!(request.path, "/nodes/pve1/config");
        let notes = self.notes.lock().unwrap();
        reply(serde_json::json!({"description": *notes, "digest": Self::digest(&notes)}))
    }

    fn write_config(&self, request: &Request, _: &Captures) -> flxp_pve::Result<Data> {
        if self.denied.load(Ordering::Relaxed) {
            return Err(flxp_pve::api_error(
                "PUT",
                &request.path,
                403,
                "Forbidden",
                br#"{"data":null,"message":"Permission check failed (/nodes/pve1, Sys.Modify)\n"}"#,
            ));
        }
        let mut notes = self.notes.lock().unwrap();
        let u: NodeConfigUpdate = request.decode_params().unwrap();
        if u.digest.as_deref() != Some(Self::digest(&notes).as_str()) {
            return Err(flxp_pve::api_error(
                "PUT",
                request.endpoint,
                500,
                "detected modified configuration - file changed by other user? Try again.",
                b"",
            ));
        }
        *notes = u.description.unwrap_or_default();
        self.writes.fetch_add(1, Ordering::Relaxed);
        reply(serde_json::Value::Null)
    }
}

fn keeper(node: &Arc<Node>, holder: &str) -> LeaseKeeper {
    let api = Pve::from_arc(Arc::clone(node) as Arc<dyn Transport>);
    LeaseKeeper::new(
        api,
        "lab".into(),
        None,
        LeaseOptions {
            ttl: Duration::from_secs(30),
            margin: MARGIN,
            holder: holder.into(),
            command: Some("evacuate".into()),
            hold: LeaseHold::Acting,
        },
    )
}

#[tokio::test(start_paused = true)]
async fn one_of_two_keepers_holds_and_the_other_takes_over_after_ttl_and_margin() {
    let node = Node::new();
    let a = keeper(&node, "a");
    let b = keeper(&node, "b");
    assert_eq!(a.tick().await, LeaseState::Held);
    assert!(matches!(b.tick().await, LeaseState::Standby { ref holder, .. } if holder == "a"));
    assert!(a.holding() && !b.holding());
    assert!(
        b.refusal()
            .contains("held by another flxp (a, running `flxp evacuate`)"),
        "{}",
        b.refusal()
    );
    // The first cluster member holds the lease, and the other notes stay.
    assert!(
        node.notes
            .lock()
            .unwrap()
            .starts_with("flxp.label.ssd\n<!-- flxp-lease zone=lab holder=a ")
    );

    // a renews every 10 s for a minute: b never gets it.
    for _ in 0..6 {
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(a.tick().await, LeaseState::Held);
        assert!(matches!(b.tick().await, LeaseState::Standby { .. }));
        assert!(a.holding() && !b.holding());
    }

    // a dies (stops renewing). b waits TTL + margin from a's last renewal, then takes it.
    let died = Instant::now();
    loop {
        tokio::time::advance(Duration::from_secs(10)).await;
        if b.tick().await == LeaseState::Held {
            break;
        }
    }
    let took = died.elapsed();
    assert!(took > Duration::from_secs(35), "{took:?}");
    assert!(took <= Duration::from_secs(45), "{took:?}");
    // a's own clock told it to stop long before.
    assert!(!a.holding());
    // Back, a finds b holding and stands by.
    assert!(matches!(a.tick().await, LeaseState::Standby { ref holder, .. } if holder == "b"));
}

#[tokio::test(start_paused = true)]
async fn a_lease_left_by_a_dead_process_on_this_host_is_taken_at_once() {
    let me = Process::current();
    assert!(me.pidns.is_some(), "this test needs /proc");
    let node = Node::new();
    // Valid for another hour, written by a process of this host and pid space.
    let left_by = |pid: u32, pidns: Option<String>| LeaseRecord {
        zone: "lab".into(),
        holder: format!("{}:{pid}:ab", me.host),
        expires: node.epoch + 3600,
        command: Some("daemon".into()),
        pidns,
    };
    // Pid 1 always runs; no pid reaches 4e9 (Linux caps pids at 2^22); the last is our own.
    for (pid, pidns, taken) in [
        (1, me.pidns.clone(), false),
        (4_000_000_000, me.pidns.clone(), true),
        (4_000_000_000, Some("1@another-boot".into()), false),
        (4_000_000_000, None, false),
        (me.pid, me.pidns.clone(), false),
    ] {
        let left = left_by(pid, pidns.clone());
        *node.notes.lock().unwrap() = format!("flxp.label.ssd\n{}", left.line());
        let b = keeper(&node, "b");
        let state = b.tick().await;
        if taken {
            assert_eq!(state, LeaseState::Held, "pid {pid} {pidns:?}");
            let notes = node.notes.lock().unwrap().clone();
            assert!(
                notes.contains(&format!("holder=b expires={} ", node.epoch + 30)),
                "{notes}"
            );
        } else {
            assert!(
                matches!(&state, LeaseState::Standby { holder, .. } if *holder == left.holder),
                "pid {pid} {pidns:?}: {state:?}"
            );
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_holder_that_cannot_renew_stops_acting_at_ttl_minus_margin() {
    let node = Node::new();
    let a = keeper(&node, "a");
    assert_eq!(a.tick().await, LeaseState::Held);
    node.down.store(true, Ordering::Relaxed);
    tokio::time::advance(Duration::from_secs(10)).await;
    assert!(matches!(a.tick().await, LeaseState::Unknown(_)));
    assert!(a.holding(), "one failed renewal is within the TTL");
    tokio::time::advance(Duration::from_secs(16)).await;
    assert!(!a.holding(), "past ttl - margin without a renewal");
}

#[tokio::test(start_paused = true)]
async fn of_two_writers_with_the_same_digest_one_wins() {
    let node = Node::new();
    let a = keeper(&node, "a");
    let b = keeper(&node, "b");
    // Both read the free lease, then both write: the second write carries a stale digest.
    let (x, y) = tokio::join!(a.tick(), b.tick());
    let held = [&x, &y].iter().filter(|s| ***s == LeaseState::Held).count();
    assert_eq!(held, 1, "{x:?} {y:?}");
    assert_eq!(node.writes.load(Ordering::Relaxed), 1);
    // The loser read the lease again: it names the winner, not a checksum error.
    let (winner, loser) = if a.holding() { ("a", &b) } else { ("b", &a) };
    assert_eq!(
        loser.refusal(),
        format!(
            "zone lab is held by another flxp ({winner}, running `flxp evacuate`) until \
             1764400030 (Proxmox clock, epoch seconds: 30 s from now)"
        )
    );
}

#[tokio::test(start_paused = true)]
async fn a_token_without_sys_modify_is_refused_naming_the_privilege_and_the_opt_out() {
    let node = Node::new();
    node.denied.store(true, Ordering::Relaxed);
    let a = keeper(&node, "a");
    assert!(matches!(a.tick().await, LeaseState::Unknown(_)));
    assert!(!a.holding());
    let why = a.refusal();
    assert!(
        why.starts_with(
            "this flxp does not hold the lease of zone lab: the API token may not write the \
             lease in node pve1's notes: it needs Sys.Modify on /nodes/pve1 (PUT \
             /nodes/pve1/config: permission denied (HTTP 403): Permission check failed \
             (/nodes/pve1, Sys.Modify)); grant it to the token's role, or turn the lease off \
             with `[lease] enabled = false`"
        ),
        "{why}"
    );
}

#[test]
fn a_lease_written_under_another_zone_name_is_the_clusters_lease() {
    // Two configs naming one cluster `lab` and `lab2` each took a lease of their own, and both
    // acted at once. Whatever the name, the line in the lease node's notes is the one lease.
    let notes = "<!-- flxp-lease zone=lab2 holder=other:7:f expires=1000 -->";
    let current = find(notes, "me:1:a");
    assert_eq!(
        current.as_ref().map(|r| r.holder.as_str()),
        Some("other:7:f")
    );
    assert!(matches!(
        judge(current.as_ref(), "me:1:a", 990, MARGIN),
        Verdict::Wait { .. }
    ));
    // Of lines an older flxp left, one per zone name, the one valid longest counts.
    let both = "<!-- flxp-lease zone=lab holder=me:1:a expires=900 -->\n\
                <!-- flxp-lease zone=lab2 holder=other:7:f expires=1000 -->";
    assert_eq!(find(both, "me:1:a").unwrap().holder, "other:7:f");
}

#[tokio::test(start_paused = true)]
async fn a_released_lease_is_taken_at_once() {
    let node = Node::new();
    let a = keeper(&node, "a");
    let b = keeper(&node, "b");
    assert_eq!(a.tick().await, LeaseState::Held);
    a.release().await;
    assert!(!a.holding());
    assert_eq!(b.tick().await, LeaseState::Held);
    let notes = node.notes.lock().unwrap().clone();
    assert_eq!(find(&notes, "b").unwrap().holder, "b");
    assert_eq!(notes.lines().count(), 2, "{notes}");
}

#[tokio::test(start_paused = true)]
async fn a_lease_given_back_stays_expired_and_tells_the_next_taker_whether_another_held_it() {
    let node = Node::new();
    let (a, b) = (keeper(&node, "a"), keeper(&node, "b"));
    // The first holder ever finds no line: nothing known of another.
    assert_eq!(a.tick().await, LeaseState::Held);
    assert!(!a.another_acted());
    a.release().await;
    let given_back = node.notes.lock().unwrap().clone();
    let line = find(&given_back, "a").unwrap();
    assert_eq!((line.holder.as_str(), line.expires), ("a", FREE));
    assert_eq!(given_back.lines().next(), Some("flxp.label.ssd"));
    // Taken again from its own line: no one else held it.
    assert_eq!(a.tick().await, LeaseState::Held);
    assert!(!a.another_acted());
    a.release().await;
    // Another flxp takes the line given back at once, and gives it back in turn.
    assert_eq!(b.tick().await, LeaseState::Held);
    assert!(b.another_acted(), "a held it before b");
    assert!(!b.another_acted(), "answered once");
    b.release().await;
    assert_eq!(a.tick().await, LeaseState::Held);
    assert!(a.another_acted(), "b held it since a did");
    assert!(!a.another_acted());
    a.release().await;
    // The line removed (by hand, or by an flxp that removed lines it gave back): unknown.
    *node.notes.lock().unwrap() = "flxp.label.ssd".into();
    assert_eq!(a.tick().await, LeaseState::Held);
    assert!(a.another_acted(), "its own line is gone");
}

#[tokio::test(start_paused = true)]
async fn a_start_and_a_round_ticking_at_once_both_hold_without_a_failed_write() {
    // The daemon's renewal loop and its first round both tick at start: one process, one lease.
    let node = Node::new();
    let a = keeper(&node, "a");
    let (x, y) = tokio::join!(a.tick(), a.tick());
    assert_eq!((&x, &y), (&LeaseState::Held, &LeaseState::Held));
    tokio::time::advance(Duration::from_secs(10)).await;
    assert_eq!(a.tick().await, LeaseState::Held, "the first renewal");
    assert_eq!(a.last(), Some(LeaseState::Held));
    assert_eq!(node.writes.load(Ordering::Relaxed), 3);
}

#[tokio::test(start_paused = true)]
async fn the_node_to_keep_is_the_first_member_and_an_unread_membership_says_why() {
    let node = Node::new();
    let a = keeper(&node, "a");
    let held = a.node_to_keep().await.unwrap();
    assert_eq!(held.node, "pve1");
    assert_eq!(
        held.to_string(),
        "pve1 holds flxp's lease of zone lab: switched off, no flxp could act on the zone"
    );
    assert_eq!(held.to_string(), kept_because("pve1", "lab"));

    let b = keeper(&node, "b");
    node.down.store(true, Ordering::Relaxed);
    let e = b.node_to_keep().await.unwrap_err();
    assert!(matches!(e, LeaseError::Membership { .. }), "{e:?}");
    assert!(
        e.to_string()
            .starts_with("cannot read the cluster membership: "),
        "{e}"
    );
}

#[tokio::test]
async fn a_call_the_double_does_not_route_is_a_501() {
    let node = Node::new();
    let api = Pve::from_arc(Arc::clone(&node) as Arc<dyn Transport>);
    let e = api.cluster_resources(None).await.unwrap_err();
    assert_eq!(e.status(), Some(501), "{e}");
}

#[tokio::test(start_paused = true)]
async fn demands_share_one_lease_released_after_the_last_and_a_refused_one_writes_nothing() {
    let node = Node::new();
    let a = Arc::new(keeper(&node, "a"));
    let first = a.demand().await.unwrap();
    let second = a.demand().await.unwrap();
    assert_eq!(node.writes.load(Ordering::Relaxed), 1, "taken once");
    // Renewed every 10 s while demanded.
    tokio::time::sleep(Duration::from_secs(25)).await;
    assert_eq!(node.writes.load(Ordering::Relaxed), 3);
    drop(first);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        node.notes.lock().unwrap().contains("holder=a "),
        "one guard left"
    );
    assert!(second.holding());
    // Another keeper is refused naming the holder, and writes nothing.
    let b = Arc::new(keeper(&node, "b"));
    let refused = b.demand().await.unwrap_err();
    assert!(
        matches!(refused, LeaseRefused::HeldElsewhere { ref holder, .. } if holder == "a"),
        "{refused}"
    );
    drop(second);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let notes = node.notes.lock().unwrap().clone();
    let left = find(&notes, "b").map(|r| (r.holder, r.expires));
    assert_eq!(left, Some(("a".into(), FREE)), "released: {notes}");
    assert!(!a.holding());
    assert_eq!(
        node.writes.load(Ordering::Relaxed),
        4,
        "3 by a, its release"
    );
    // Nothing more without demand.
    tokio::time::sleep(Duration::from_secs(300)).await;
    assert_eq!(node.writes.load(Ordering::Relaxed), 4);
    // Free now, b takes it.
    let taken = b.demand().await.unwrap();
    assert!(taken.holding());
}
