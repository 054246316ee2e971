//! Tasks: the UPID that names one, `GET /nodes/{node}/tasks/{upid}/status` and `/log`.
//!
//! Task-starting calls answer with a UPID; its `node` is where the task runs, so status and log
//! calls go to that node. `GET /cluster/tasks` entries are `flxp_core`'s [`Task`](super::Task).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use flxp_core::lenient;

use super::quirks::string_required;

/// A Proxmox task id: `UPID:{node}:{pid:08X}:{pstart:08X}:{starttime:08X}:{type}:{id}:{user}:`.
///
/// Parsing checks the schema's decode regex exactly; the original text is kept, so a UPID read
/// from Proxmox (hex may be lower-case) is sent back byte for byte.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Upid {
    raw: String,
    node: String,
    pid: u32,
    pstart: u64,
    starttime: i64,
    kind: String,
    id: String,
    user: String,
}

/// A UPID that does not match Proxmox's format; the message names the part that is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid UPID {upid:?}: {reason}")]
pub struct UpidError {
    /// The offending text.
    pub upid: String,
    /// What is wrong with it.
    pub reason: String,
}

impl Upid {
    /// Builds a UPID from its parts, formatted exactly as Proxmox formats one.
    ///
    /// The parts are checked like a parsed UPID (node name, no `:`/whitespace/`/` in type, id, user).
    pub fn new(
        node: &str,
        pid: u32,
        pstart: u64,
        starttime: i64,
        kind: &str,
        id: &str,
        user: &str,
    ) -> Result<Self, UpidError> {
        let raw = format!("UPID:{node}:{pid:08X}:{pstart:08X}:{starttime:08X}:{kind}:{id}:{user}:");
        raw.parse()
    }

    /// The node the task runs on.
    pub fn node(&self) -> &str {
        &self.node
    }
    /// The worker's process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }
    /// The worker's process start time (clock ticks since boot).
    pub fn pstart(&self) -> u64 {
        self.pstart
    }
    /// The task's start time (epoch seconds).
    pub fn starttime(&self) -> i64 {
        self.starttime
    }
    /// The task type (`qmigrate`, `qmclone`, `hamigrate`, ...).
    pub fn kind(&self) -> &str {
        &self.kind
    }
    /// The task's object id (a VMID for guest tasks; for `qmclone` the source VMID).
    pub fn id(&self) -> &str {
        &self.id
    }
    /// The user (or `user@realm!token`) that started it.
    pub fn user(&self) -> &str {
        &self.user
    }
    /// The UPID text.
    pub fn as_str(&self) -> &str {
        &self.raw
    }
}

fn is_node_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

fn is_hex(s: &str, min: usize, max: usize) -> bool {
    (min..=max).contains(&s.len()) && s.bytes().all(|c| c.is_ascii_hexdigit())
}

fn is_field(s: &str) -> bool {
    !s.contains(|c: char| c == ':' || c == '/' || c.is_whitespace())
}

impl FromStr for Upid {
    type Err = UpidError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let fail = |reason: &str| UpidError {
            upid: s.to_owned(),
            reason: reason.to_owned(),
        };
        let body = s
            .strip_prefix("UPID:")
            .ok_or_else(|| fail("it does not start with \"UPID:\""))?;
        let body = body
            .strip_suffix(':')
            .ok_or_else(|| fail("it does not end with ':'"))?;
        let parts: Vec<&str> = body.split(':').collect();
        let [node, pid, pstart, starttime, kind, id, user] = parts[..] else {
            return Err(fail(&format!(
                "expected 7 ':'-separated fields, found {}",
                parts.len()
            )));
        };
        if !is_node_name(node) {
            return Err(fail("the node name is not a valid node name"));
        }
        if !is_hex(pid, 8, 8) {
            return Err(fail("pid is not 8 hex digits"));
        }
        if !is_hex(pstart, 8, 9) {
            return Err(fail("pstart is not 8 or 9 hex digits"));
        }
        if !is_hex(starttime, 8, 8) {
            return Err(fail("starttime is not 8 hex digits"));
        }
        if kind.is_empty() || !is_field(kind) {
            return Err(fail("the task type is empty or holds '/' or whitespace"));
        }
        if !is_field(id) {
            return Err(fail("the task id holds '/' or whitespace"));
        }
        if user.is_empty() || !is_field(user) {
            return Err(fail("the user is empty or holds '/' or whitespace"));
        }
        // The hex checks above make these parses infallible; map anyway rather than unwrap.
        let hex = |v: &str| u64::from_str_radix(v, 16).map_err(|e| fail(&e.to_string()));
        Ok(Self {
            raw: s.to_owned(),
            node: node.to_owned(),
            pid: u32::try_from(hex(pid)?).map_err(|e| fail(&e.to_string()))?,
            pstart: hex(pstart)?,
            starttime: i64::try_from(hex(starttime)?).map_err(|e| fail(&e.to_string()))?,
            kind: kind.to_owned(),
            id: id.to_owned(),
            user: user.to_owned(),
        })
    }
}

impl fmt::Display for Upid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

impl Serialize for Upid {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.raw)
    }
}

impl<'de> Deserialize<'de> for Upid {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// `GET /nodes/{node}/tasks/{upid}/status`.
#[serde_with::apply(Option => #[serde(default, with = "lenient::opt")])]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskStatus {
    /// The task's UPID.
    #[serde(deserialize_with = "string_required")]
    pub upid: String,
    /// Node the task runs on.
    pub node: Option<String>,
    /// Worker process id.
    pub pid: Option<u64>,
    /// Worker process start (clock ticks).
    pub pstart: Option<u64>,
    /// Start time (epoch seconds).
    pub starttime: Option<i64>,
    /// Task type.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// Task object id.
    pub id: Option<String>,
    /// User that started it.
    pub user: Option<String>,
    /// API token that started it, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokenid: Option<String>,
    /// `running` or `stopped`.
    #[serde(deserialize_with = "string_required")]
    pub status: String,
    /// Only when stopped: `OK`, `WARNINGS: <n>`, `unexpected status` or the error text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exitstatus: Option<String>,
}

impl TaskStatus {
    /// Whether the task still runs (anything but `stopped`).
    pub fn is_running(&self) -> bool {
        self.status != "stopped"
    }

    /// Whether the task stopped successfully: exit status `OK` or `WARNINGS: <n>`.
    pub fn is_success(&self) -> bool {
        !self.is_running()
            && self
                .exitstatus
                .as_deref()
                .is_some_and(is_success_exitstatus)
    }
}

/// Proxmox's success rule for a task's exit status: `OK` or `^WARNINGS: \d+$`.
pub fn is_success_exitstatus(exitstatus: &str) -> bool {
    exitstatus == "OK"
        || exitstatus
            .strip_prefix("WARNINGS: ")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()))
}

/// One line of `GET /nodes/{node}/tasks/{upid}/log`: its number and text.
#[serde_with::apply(Option => #[serde(with = "lenient::opt")])]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TaskLogLine {
    /// Line number, from 1.
    pub n: Option<u64>,
    /// The text of the line.
    pub t: Option<String>,
}

/// Query of `GET /nodes/{node}/tasks/{upid}/log`: which lines.
#[serde_with::apply(Option => #[serde(with = "lenient::opt")])]
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TaskLogQuery {
    /// First line to return (0-based, default 0).
    pub start: Option<u64>,
    /// How many lines (default 50).
    pub limit: Option<u64>,
}

#[cfg(test)]
mod tests {
    // Tests may panic on malformed fixtures: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn upid_parses_every_part() {
        let u: Upid = "UPID:pve1:000A1B2C:0123ABCD:6929A5C0:qmigrate:105:root@pam!flxp:"
            .parse()
            .unwrap();
        assert_eq!(u.node(), "pve1");
        assert_eq!(u.pid(), 0x000A_1B2C);
        assert_eq!(u.pstart(), 0x0123_ABCD);
        assert_eq!(u.starttime(), 0x6929_A5C0);
        assert_eq!(u.kind(), "qmigrate");
        assert_eq!(u.id(), "105");
        assert_eq!(u.user(), "root@pam!flxp");
    }

    #[test]
    fn upid_formats_exactly_like_proxmox_and_round_trips() {
        let u = Upid::new(
            "pve2",
            4711,
            0x1_2345_6789,
            1_764_400_000,
            "qmclone",
            "9000",
            "root@pam",
        )
        .unwrap();
        assert_eq!(
            u.as_str(),
            "UPID:pve2:00001267:123456789:692A9B80:qmclone:9000:root@pam:"
        );
        let back: Upid = u.to_string().parse().unwrap();
        assert_eq!(back, u);
        assert_eq!(back.pstart(), 0x1_2345_6789);
        assert_eq!(serde_json::to_string(&u).unwrap(), format!("\"{u}\""));
    }

    #[test]
    fn upid_keeps_lowercase_hex_as_sent() {
        let text = "UPID:pve1:0000abcd:0000abcd:6929a5c0:qmstart:101:root@pam:";
        let u: Upid = text.parse().unwrap();
        assert_eq!(u.to_string(), text);
        assert_eq!(u.pid(), 0xabcd);
    }

    #[test]
    fn an_empty_task_id_is_allowed() {
        let u: Upid = "UPID:pve1:00000001:00000001:6929A5C0:migrateall::root@pam:"
            .parse()
            .unwrap();
        assert_eq!(u.id(), "");
    }

    #[test]
    fn malformed_upids_name_the_bad_part() {
        for (text, reason) in [
            (
                "UPID:pve1:00000001:00000001:6929A5C0:qmstart:101:root@pam",
                "end with ':'",
            ),
            (
                "PID:pve1:00000001:00000001:6929A5C0:qmstart:101:root@pam:",
                "UPID:",
            ),
            (
                "UPID:-pve:00000001:00000001:6929A5C0:qmstart:101:root@pam:",
                "node name",
            ),
            (
                "UPID:pve1:0001:00000001:6929A5C0:qmstart:101:root@pam:",
                "pid",
            ),
            (
                "UPID:pve1:00000001:0000001:6929A5C0:qmstart:101:root@pam:",
                "pstart",
            ),
            (
                "UPID:pve1:00000001:00000001:6929A5C:qmstart:101:root@pam:",
                "starttime",
            ),
            (
                "UPID:pve1:00000001:00000001:6929A5C0:qm start:101:root@pam:",
                "type",
            ),
            (
                "UPID:pve1:00000001:00000001:6929A5C0:qmstart:1/1:root@pam:",
                "task id",
            ),
            ("UPID:pve1:00000001:00000001:6929A5C0:qmstart:101::", "user"),
            (
                "UPID:pve1:00000001:00000001:6929A5C0:qmstart:101:a:b:",
                "7 ':'-separated",
            ),
        ] {
            let err = text.parse::<Upid>().unwrap_err();
            assert!(err.reason.contains(reason), "{text}: {err}");
        }
    }

    #[test]
    fn task_status_reads_running_and_stopped_shapes() {
        let s: TaskStatus = serde_json::from_str(
            r#"{"upid":"UPID:pve1:000A1B2C:0123ABCD:6929A5C0:qmigrate:105:root@pam:",
                "node":"pve1","pid":"662316","pstart":19114957,"starttime":1764337088,
                "type":"qmigrate","id":"105","user":"root@pam","status":"running"}"#,
        )
        .unwrap();
        assert!(s.is_running());
        assert!(!s.is_success());
        assert_eq!(s.pid, Some(662_316));
        let s: TaskStatus =
            serde_json::from_str(r#"{"upid":"x","status":"stopped","exitstatus":"WARNINGS: 2"}"#)
                .unwrap();
        assert!(s.is_success());
        let s: TaskStatus = serde_json::from_str(
            r#"{"upid":"x","status":"stopped","exitstatus":"can't migrate running VM without --online"}"#,
        )
        .unwrap();
        assert!(!s.is_success() && !s.is_running());
    }

    #[test]
    fn success_rule_is_ok_or_warnings_with_a_count() {
        assert!(is_success_exitstatus("OK"));
        assert!(is_success_exitstatus("WARNINGS: 12"));
        assert!(!is_success_exitstatus("WARNINGS: "));
        assert!(!is_success_exitstatus("WARNINGS: x"));
        assert!(!is_success_exitstatus("unexpected status"));
    }

    #[test]
    fn log_lines_and_query() {
        let l: Vec<TaskLogLine> =
            serde_json::from_str(r#"[{"n":1,"t":"starting migration"},{"n":"2","t":"TASK OK"}]"#)
                .unwrap();
        assert_eq!(l[1].n, Some(2));
        let q = TaskLogQuery {
            start: Some(0),
            limit: Some(50),
        };
        assert_eq!(crate::types::form::to_form(&q).unwrap(), "start=0&limit=50");
    }
}
