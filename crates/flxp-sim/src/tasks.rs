//! The task table: UPIDs, status and log of every task the simulated cluster ran or runs, and the
//! views `/cluster/tasks` and `/nodes/{node}/tasks/...` give of it.
//!
//! A task's log is written ahead with simulated timestamps; readers see the lines whose time has
//! come, so a migration's progress appears while it runs. Ending a task is the world's job (it
//! knows the effects); this table only records the outcome.

use std::collections::HashMap;

use flxp_core::snapshot::raw::Task as RawTask;
use flxp_pve::types::{Upid, UpidError};
use serde_json::{Value, json};

use crate::clock::log_stamp;

/// One task.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    /// Its UPID.
    pub upid: String,
    /// Node it runs on.
    pub node: String,
    /// Worker pid.
    pub pid: u32,
    /// Process start in clock ticks since boot.
    pub pstart: u64,
    /// Start, epoch seconds.
    pub starttime: i64,
    /// Task type (`qmigrate`, `qmclone`, ...).
    pub kind: String,
    /// Task object id (a VMID for guest tasks).
    pub id: String,
    /// User or `user@realm!token` that started it.
    pub user: String,
    /// End, simulated epoch seconds, once it stopped.
    pub ended: Option<f64>,
    /// `OK` or the error text, once it stopped.
    pub exitstatus: Option<String>,
    /// Log lines with the simulated time they appear at.
    pub log: Vec<(f64, String)>,
}

impl Task {
    /// Whether it still runs.
    pub fn is_running(&self) -> bool {
        self.ended.is_none()
    }

    /// The user part of `user` (without `!token`).
    pub fn userid(&self) -> &str {
        self.user.split('!').next().unwrap_or(&self.user)
    }

    /// The token name, when a token started it.
    pub fn tokenid(&self) -> Option<&str> {
        self.user.split_once('!').map(|(_, t)| t)
    }

    /// `GET /nodes/{node}/tasks/{upid}/status`.
    pub fn status_json(&self) -> Value {
        let mut v = json!({
            "upid": self.upid, "node": self.node, "pid": self.pid, "pstart": self.pstart,
            "starttime": self.starttime, "type": self.kind, "id": self.id, "user": self.userid(),
            "status": if self.is_running() { "running" } else { "stopped" },
        });
        if let Some(t) = self.tokenid() {
            v["tokenid"] = json!(t);
        }
        if let Some(e) = &self.exitstatus {
            v["exitstatus"] = json!(e);
        }
        v
    }

    /// The entry of `/cluster/tasks` and `/nodes/{node}/tasks`.
    pub fn list_entry(&self) -> RawTask {
        RawTask {
            upid: Some(self.upid.clone()),
            node: Some(self.node.clone()),
            kind: Some(self.kind.clone()),
            id: Some(self.id.clone()),
            user: Some(self.userid().to_string()),
            tokenid: self.tokenid().map(str::to_string),
            starttime: Some(self.starttime),
            endtime: self.ended.map(|e| e.floor() as i64),
            status: self.exitstatus.clone(),
            pid: Some(u64::from(self.pid)),
            pstart: Some(self.pstart),
            saved: (!self.is_running()).then(|| "1".to_string()),
            // Proxmox does not list a migration's target, nor how far it got: flxp reads both
            // from the log.
            target: None,
            arrived: None,
        }
    }

    /// Log lines visible at `now`, numbered from 1, as `{n, t}`.
    pub fn visible_log(&self, now: f64) -> Vec<Value> {
        self.log
            .iter()
            .filter(|(t, _)| *t <= now)
            .enumerate()
            .map(|(i, (_, line))| json!({"n": i + 1, "t": line}))
            .collect()
    }
}

/// The text of a UPID built with [`Upid::new`]
/// (`UPID:{node}:{pid:08X}:{pstart:08X}:{starttime:08X}:{type}:{id}:{user}:`).
///
/// One formatter for client and simulator: the text is kept whether or not it would parse (a
/// scenario may name a node the client would refuse), so take it from the error too.
pub fn upid_text(built: Result<Upid, UpidError>) -> String {
    match built {
        Ok(upid) => upid.to_string(),
        Err(invalid) => invalid.upid,
    }
}

/// Decodes the node of a UPID (the second field), if it has the UPID shape.
pub fn upid_node(upid: &str) -> Option<&str> {
    let fields: Vec<&str> = upid.split(':').collect();
    (fields.len() == 9 && fields[0] == "UPID" && fields[8].is_empty()).then(|| fields[1])
}

/// Finished tasks whose logs are kept; older ones keep their status but drop their log lines,
/// so a long-running simulator's memory stays bounded.
const LOGS_KEPT: usize = 2000;

/// All tasks, in start order.
#[derive(Debug, Clone, Default)]
pub struct TaskTable {
    tasks: Vec<Task>,
    index: HashMap<String, usize>,
    next_pid: u32,
    finished: std::collections::VecDeque<usize>,
}

impl TaskTable {
    /// Starts a task on `node` at simulated time `now`; returns its handle.
    pub fn start(
        &mut self,
        node: &str,
        node_booted: f64,
        kind: &str,
        id: &str,
        user: &str,
        now: f64,
    ) -> usize {
        self.next_pid += 1;
        let pid = 100_000 + self.next_pid;
        let starttime = now.floor() as i64;
        let pstart = ((now - node_booted).max(0.0) * 100.0) as u64 + u64::from(self.next_pid);
        let upid = upid_text(Upid::new(node, pid, pstart, starttime, kind, id, user));
        let task = Task {
            upid: upid.clone(),
            node: node.to_string(),
            pid,
            pstart,
            starttime,
            kind: kind.to_string(),
            id: id.to_string(),
            user: user.to_string(),
            ended: None,
            exitstatus: None,
            log: Vec::new(),
        };
        self.index.insert(upid, self.tasks.len());
        self.tasks.push(task);
        self.tasks.len() - 1
    }

    /// Adds a log line that appears at `at`.
    pub fn log(&mut self, task: usize, at: f64, line: impl Into<String>) {
        if let Some(t) = self.tasks.get_mut(task) {
            t.log.push((at, line.into()));
        }
    }

    /// Adds a log line prefixed with its timestamp, as migration logs are.
    pub fn log_stamped(&mut self, task: usize, at: f64, line: &str) {
        self.log(task, at, format!("{} {line}", log_stamp(at)));
    }

    /// Stops a task at `at` with `OK` or an error text (written as `TASK ERROR: ...`).
    pub fn finish(&mut self, task: usize, at: f64, result: Result<(), String>) {
        let Some(t) = self.tasks.get_mut(task) else {
            return;
        };
        if t.ended.is_some() {
            return;
        }
        // Lines planned for later than the end never happen.
        t.log.retain(|(time, _)| *time <= at);
        match result {
            Ok(()) => {
                t.log.push((at, "TASK OK".into()));
                t.exitstatus = Some("OK".into());
            }
            Err(msg) => {
                let msg = msg.trim_end().to_string();
                t.log.push((at, format!("TASK ERROR: {msg}")));
                t.exitstatus = Some(msg);
            }
        }
        t.ended = Some(at);
        self.finished.push_back(task);
        if self.finished.len() > LOGS_KEPT {
            if let Some(old) = self
                .finished
                .pop_front()
                .and_then(|i| self.tasks.get_mut(i))
            {
                old.log = Vec::new();
            }
        }
    }

    /// The task with this UPID.
    pub fn by_upid(&self, upid: &str) -> Option<&Task> {
        self.index.get(upid).and_then(|i| self.tasks.get(*i))
    }

    /// The handle of the task with this UPID.
    pub fn index_of(&self, upid: &str) -> Option<usize> {
        self.index.get(upid).copied()
    }

    /// The task with this handle.
    pub fn get(&self, task: usize) -> Option<&Task> {
        self.tasks.get(task)
    }

    /// All tasks in start order.
    pub fn all(&self) -> &[Task] {
        &self.tasks
    }

    /// Adds a finished (or still listed as running) task from a snapshot's history.
    pub fn import(&mut self, raw: &RawTask) -> Option<usize> {
        let upid = raw.upid.clone()?;
        if self.index.contains_key(&upid) {
            return None;
        }
        let fields: Vec<&str> = upid.split(':').collect();
        let hex = |i: usize| fields.get(i).and_then(|f| u64::from_str_radix(f, 16).ok());
        let user = match (&raw.user, &raw.tokenid) {
            (Some(u), Some(t)) => format!("{u}!{t}"),
            (Some(u), None) => u.clone(),
            _ => fields.get(7).map(|s| s.to_string()).unwrap_or_default(),
        };
        let task = Task {
            upid: upid.clone(),
            node: raw
                .node
                .clone()
                .or_else(|| upid_node(&upid).map(str::to_string))
                .unwrap_or_default(),
            pid: hex(2).and_then(|p| u32::try_from(p).ok()).unwrap_or(0),
            pstart: hex(3).unwrap_or(0),
            starttime: raw
                .starttime
                .or_else(|| hex(4).and_then(|s| i64::try_from(s).ok()))
                .unwrap_or(0),
            kind: raw
                .kind
                .clone()
                .or_else(|| fields.get(5).map(|s| s.to_string()))
                .unwrap_or_default(),
            id: raw
                .id
                .clone()
                .or_else(|| fields.get(6).map(|s| s.to_string()))
                .unwrap_or_default(),
            user,
            ended: raw.endtime.map(|e| e as f64),
            exitstatus: raw.status.clone().filter(|s| s != "running"),
            log: Vec::new(),
        };
        self.index.insert(upid, self.tasks.len());
        self.tasks.push(task);
        Some(self.tasks.len() - 1)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may panic

    use super::*;

    #[test]
    fn upids_have_the_schema_shape() {
        let upid = upid_text(Upid::new(
            "pve1",
            0x1234,
            0xABCDEF,
            1_764_400_000,
            "qmigrate",
            "100",
            "root@pam!flxp",
        ));
        assert_eq!(
            upid,
            "UPID:pve1:00001234:00ABCDEF:692A9B80:qmigrate:100:root@pam!flxp:"
        );
        assert_eq!(upid_node(&upid), Some("pve1"));
        assert_eq!(upid_node("UPID:pve1:x"), None);
    }

    #[test]
    fn finishing_writes_status_and_hides_future_lines() {
        let mut t = TaskTable::default();
        let i = t.start("pve1", 0.0, "qmigrate", "100", "root@pam!flxp", 100.0);
        t.log(i, 100.0, "start");
        t.log(i, 150.0, "later");
        let task = t.get(i).cloned().unwrap();
        assert_eq!(task.visible_log(120.0).len(), 1);
        assert_eq!(task.status_json()["status"], "running");
        assert_eq!(task.status_json()["user"], "root@pam");
        assert_eq!(task.status_json()["tokenid"], "flxp");
        t.finish(i, 130.0, Err("migration problems\n".into()));
        let task = t.by_upid(&task.upid).cloned().unwrap();
        assert_eq!(task.exitstatus.as_deref(), Some("migration problems"));
        let log = task.visible_log(1e9);
        assert_eq!(log.len(), 2);
        assert_eq!(log[1]["t"], "TASK ERROR: migration problems");
        assert_eq!(task.list_entry().endtime, Some(130));
    }
}
