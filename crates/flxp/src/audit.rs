//! The audit log: one JSON line per action asked of the API (who by token name and role, what,
//! when, the plan and the result), appended to a file that survives restarts and is rotated by
//! size. It is flxp's only local state; it is written, never read back for a decision.
//!
//! Nothing secret is written: callers hand in arguments already redacted ([`redact`]), and
//! tokens appear by their configured name only. Writes are small and synchronous: async callers
//! run them on the blocking pool.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::AuditSection;

/// The file name under the state directory.
pub const FILE_NAME: &str = "audit.jsonl";

/// One action: a line of the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// When it was asked, Unix seconds.
    pub time: i64,
    /// The name of the token that asked (never the token).
    pub token: String,
    /// The token's role.
    pub role: String,
    /// The mutation (`rebalance`, `evacuate`, `createVM`, `maintenance`, ...).
    pub action: String,
    /// The zone it was about, when it names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// Its arguments, secrets redacted.
    #[serde(default)]
    pub args: serde_json::Value,
    /// `ok`, `error`, or `refused` (the token's role does not allow it).
    pub outcome: String,
    /// Why it failed or was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The plan carried out: migrations and imbalance before and after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<serde_json::Value>,
    /// What carrying it out did (migrations done and failed, the VM created, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
}

/// The log file and its rotation.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    max_bytes: u64,
    keep: u32,
    /// One writer at a time: a line is never interleaved with another, nor a rotation.
    lock: std::sync::Mutex<()>,
}

/// Where the log goes unless `[audit] path` says: systemd's `$STATE_DIRECTORY` (the units set
/// `StateDirectory=flxp`, so `/var/lib/flxp`), else `$XDG_STATE_HOME/flxp`, else
/// `~/.local/state/flxp`; `None` when none of them is set.
pub fn default_path() -> Option<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(dirs) = var("STATE_DIRECTORY") {
        // systemd lists one directory per `StateDirectory=` entry, separated by colons.
        let first = dirs.to_string_lossy().split(':').next()?.to_owned();
        return Some(Path::new(&first).join(FILE_NAME));
    }
    if let Some(state) = var("XDG_STATE_HOME") {
        return Some(PathBuf::from(state).join("flxp").join(FILE_NAME));
    }
    var("HOME").map(|h| PathBuf::from(h).join(".local/state/flxp").join(FILE_NAME))
}

impl AuditLog {
    /// The log `[audit]` describes, its directory created; `None` when it is off. A file that
    /// cannot be created is an error: a service that acts must not act unrecorded.
    pub fn open(section: &AuditSection) -> anyhow::Result<Option<Self>> {
        use anyhow::Context;
        if !section.enabled {
            return Ok(None);
        }
        let path = match section.path.clone().or_else(default_path) {
            Some(p) => p,
            None => anyhow::bail!(
                "audit: no state directory (neither STATE_DIRECTORY, XDG_STATE_HOME nor HOME is set): set [audit] path, or enabled = false"
            ),
        };
        let log = Self::at(path, section.max_size.0, section.keep);
        log.touch()
            .with_context(|| format!("audit log {} cannot be written", log.path.display()))?;
        Ok(Some(log))
    }

    /// Whether [`Self::open`] would succeed, leaving nothing behind: what it would create (the
    /// file, missing directories) is created and removed again, an existing file is opened
    /// without a change. `flxp config check` runs it, so that it refuses what `serve` refuses.
    pub fn check(section: &AuditSection) -> anyhow::Result<()> {
        use anyhow::Context;
        if !section.enabled {
            return Ok(());
        }
        let Some(path) = section.path.clone().or_else(default_path) else {
            // `open` says why, with its advice.
            return Self::open(section).map(drop);
        };
        let log = Self::at(path, section.max_size.0, section.keep);
        let missing: Vec<PathBuf> = log
            .path
            .ancestors()
            .skip(1)
            .filter(|d| !d.as_os_str().is_empty())
            .take_while(|d| !d.exists())
            .map(Path::to_path_buf)
            .collect();
        let existed = log.path.exists();
        let result = log.touch();
        if !existed {
            // Removal failures leave only an empty file or directory, which serve would create.
            let _ = std::fs::remove_file(&log.path);
            for dir in &missing {
                let _ = std::fs::remove_dir(dir);
            }
        }
        result.with_context(|| format!("audit log {} cannot be written", log.path.display()))
    }

    /// A log at `path`, rotated before it grows past `max_bytes`, keeping `keep` old files.
    pub fn at(path: PathBuf, max_bytes: u64, keep: u32) -> Self {
        Self {
            path,
            max_bytes,
            keep,
            lock: std::sync::Mutex::new(()),
        }
    }

    /// The current file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The `n`th rotated file (`audit.jsonl.1` is the newest).
    fn rotated(&self, n: u32) -> PathBuf {
        let mut name = self.path.as_os_str().to_owned();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    }

    /// Creates the directory and the file (readable by owner and group only).
    fn touch(&self) -> std::io::Result<()> {
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        self.file().map(drop)
    }

    fn file(&self) -> std::io::Result<std::fs::File> {
        let mut o = std::fs::OpenOptions::new();
        o.create(true).append(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o640);
        o.open(&self.path)
    }

    /// Appends one entry, rotating first when the line would take the file past its size.
    pub fn append(&self, entry: &Entry) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(entry).map_err(std::io::Error::other)?;
        line.push(b'\n');
        let _one = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let size = std::fs::metadata(&self.path).map_or(0, |m| m.len());
        if size > 0 && size + line.len() as u64 > self.max_bytes {
            self.rotate()?;
        }
        let mut f = self.file()?;
        f.write_all(&line)?;
        f.flush()
    }

    /// `audit.jsonl.{k-1}` → `.{k}`, ..., `audit.jsonl` → `.1`; the oldest beyond `keep` goes.
    fn rotate(&self) -> std::io::Result<()> {
        if self.keep == 0 {
            return std::fs::remove_file(&self.path);
        }
        match std::fs::remove_file(self.rotated(self.keep)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        for n in (1..self.keep).rev() {
            match std::fs::rename(self.rotated(n), self.rotated(n + 1)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        std::fs::rename(&self.path, self.rotated(1))
    }

    /// Entries at or after `since` (Unix seconds), newest first, at most `limit`; read from the
    /// current file and the rotated ones. A line that is not an entry (cut short by a crash) is
    /// skipped with a warning.
    pub fn read(&self, since: Option<i64>, limit: usize) -> std::io::Result<Vec<Entry>> {
        let _one = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = Vec::new();
        let files =
            std::iter::once(self.path.clone()).chain((1..=self.keep).map(|n| self.rotated(n)));
        for path in files {
            let f = match std::fs::File::open(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            let mut entries = Vec::new();
            for (i, line) in std::io::BufReader::new(f).lines().enumerate() {
                let line = line?;
                if line.trim().is_empty() {
                    continue;
                }
                match serde_json::from_str::<Entry>(&line) {
                    Ok(e) if since.is_none_or(|s| e.time >= s) => entries.push(e),
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(file = %path.display(), line = i + 1, error = %e, "audit log line skipped")
                    }
                }
            }
            // Newer files first, and newest lines first within a file.
            out.extend(entries.into_iter().rev());
            if out.len() >= limit {
                break;
            }
        }
        out.truncate(limit);
        Ok(out)
    }
}

/// Argument names whose values are never written: passwords, secrets, tokens, keys of chat hooks.
fn is_secret(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    ["password", "secret", "token", "authorization"]
        .iter()
        .any(|s| k.contains(s))
}

/// `value` with the value of every secret-looking key replaced by `"[redacted]"`, at any depth.
pub fn redact(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| {
                    if is_secret(&k) && !v.is_null() {
                        (k, Value::String("[redacted]".into()))
                    } else {
                        (k, redact(v))
                    }
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(redact).collect()),
        other => other,
    }
}

/// Longest string a record keeps, in bytes: a refused request may carry a megabyte-long name.
const MAX_TEXT: usize = 1024;
/// Most items a record keeps of one list or object.
const MAX_ITEMS: usize = 1000;

/// `value` fit for a record: every string cut after 1 KiB and every list or object after 1,000
/// items, at any depth, each cut saying how long the whole was. A record says what was asked;
/// it need not repeat a hostile request byte for byte (and must not grow the log by megabytes).
pub fn bounded(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::String(s) => match flxp_core::names::cut_at(&s, MAX_TEXT) {
            Some(kept) => Value::String(format!("{kept}… ({} bytes in all)", s.len())),
            None => Value::String(s),
        },
        Value::Array(items) => {
            let total = items.len();
            let mut kept: Vec<Value> = items.into_iter().take(MAX_ITEMS).map(bounded).collect();
            if total > MAX_ITEMS {
                kept.push(Value::String(format!("… ({total} items in all)")));
            }
            Value::Array(kept)
        }
        Value::Object(map) => {
            let total = map.len();
            let mut kept: serde_json::Map<String, Value> = map
                .into_iter()
                .take(MAX_ITEMS)
                .map(|(k, v)| {
                    let k = match flxp_core::names::cut_at(&k, MAX_TEXT) {
                        Some(cut) => format!("{cut}…"),
                        None => k,
                    };
                    (k, bounded(v))
                })
                .collect();
            if total > MAX_ITEMS {
                kept.insert("…".into(), Value::String(format!("{total} keys in all")));
            }
            Value::Object(kept)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may panic

    use serde_json::json;

    use super::*;

    fn entry(time: i64, action: &str) -> Entry {
        Entry {
            time,
            token: "ci".into(),
            role: "operator".into(),
            action: action.into(),
            zone: Some("lab".into()),
            args: json!({}),
            outcome: "ok".into(),
            error: None,
            plan: None,
            result: None,
        }
    }

    #[test]
    fn the_check_refuses_what_open_refuses_and_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let at = |path: PathBuf| AuditSection {
            path: Some(path),
            ..AuditSection::default()
        };
        // A directory, and a path under a regular file: serve could not write either.
        let e = AuditLog::check(&at(dir.path().to_path_buf())).unwrap_err();
        assert_eq!(
            format!("{e:#}").split(':').next().unwrap(),
            format!("audit log {} cannot be written", dir.path().display())
        );
        std::fs::write(dir.path().join("file"), "x").unwrap();
        assert!(AuditLog::check(&at(dir.path().join("file/audit.jsonl"))).is_err());
        // Missing directories: fine for serve (it creates them); the check removes what it made.
        let deep = dir.path().join("a/b/audit.jsonl");
        AuditLog::check(&at(deep.clone())).unwrap();
        assert!(!dir.path().join("a").exists());
        // An existing log is opened, not changed.
        std::fs::create_dir(dir.path().join("logs")).unwrap();
        let kept = dir.path().join("logs/audit.jsonl");
        std::fs::write(&kept, "{}\n").unwrap();
        AuditLog::check(&at(kept.clone())).unwrap();
        assert_eq!(std::fs::read_to_string(&kept).unwrap(), "{}\n");
        assert!(
            AuditLog::check(&AuditSection {
                enabled: false,
                ..at(dir.path().to_path_buf())
            })
            .is_ok()
        );
    }

    #[test]
    fn entries_are_read_back_newest_first_across_rotations() {
        let dir = tempfile::tempdir().unwrap();
        let line = serde_json::to_vec(&entry(1, "rebalance")).unwrap().len() as u64 + 1;
        // Room for two lines per file, two old files kept.
        let log = AuditLog::at(dir.path().join("a/audit.jsonl"), 2 * line, 2);
        log.touch().unwrap();
        for t in 1..=7 {
            log.append(&entry(t, "rebalance")).unwrap();
        }
        let names: Vec<String> = {
            let mut n: Vec<String> = std::fs::read_dir(dir.path().join("a"))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            n.sort();
            n
        };
        assert_eq!(names, ["audit.jsonl", "audit.jsonl.1", "audit.jsonl.2"]);
        let times: Vec<i64> = log
            .read(None, 100)
            .unwrap()
            .iter()
            .map(|e| e.time)
            .collect();
        // 1 and 2 rotated away past `keep`.
        assert_eq!(times, [7, 6, 5, 4, 3]);
        let times: Vec<i64> = log
            .read(Some(5), 2)
            .unwrap()
            .iter()
            .map(|e| e.time)
            .collect();
        assert_eq!(times, [7, 6]);
    }

    #[test]
    fn a_record_keeps_a_bounded_excerpt_of_hostile_arguments() {
        let name = "n".repeat(1 << 20);
        let tags: Vec<String> = (0..5000).map(|i| format!("t{i}")).collect();
        let args = bounded(json!({"zone": name, "options": {"tags": tags, "name": "web-1"}}));
        let zone = args["zone"].as_str().unwrap();
        assert!(zone.len() < 1100, "{} bytes kept", zone.len());
        assert!(
            zone.ends_with("… (1048576 bytes in all)"),
            "{}",
            &zone[1000..]
        );
        let kept = args["options"]["tags"].as_array().unwrap();
        assert_eq!(kept.len(), 1001);
        assert_eq!(kept[1000], json!("… (5000 items in all)"));
        assert_eq!(
            args["options"]["name"],
            json!("web-1"),
            "short values are kept as they are"
        );
    }

    #[test]
    fn secrets_are_redacted_at_any_depth() {
        let v = redact(json!({
            "zone": "lab",
            "options": { "password": "hunter2", "user": "admin", "sshPublicKey": "ssh-ed25519 A" },
            "list": [{ "apiToken": "t" }],
            "password": null
        }));
        assert_eq!(
            v,
            json!({
                "zone": "lab",
                "options": { "password": "[redacted]", "user": "admin", "sshPublicKey": "ssh-ed25519 A" },
                "list": [{ "apiToken": "[redacted]" }],
                "password": null
            })
        );
    }

    #[test]
    fn a_cut_line_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::at(dir.path().join("audit.jsonl"), 1 << 20, 1);
        log.append(&entry(1, "evacuate")).unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(log.path())
            .unwrap()
            .write_all(b"{\"time\": 2, \"tok\n")
            .unwrap();
        log.append(&entry(3, "maintenance")).unwrap();
        let got: Vec<String> = log
            .read(None, 10)
            .unwrap()
            .into_iter()
            .map(|e| e.action)
            .collect();
        assert_eq!(got, ["maintenance", "evacuate"]);
    }
}
