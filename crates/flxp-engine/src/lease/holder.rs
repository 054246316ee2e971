//! Who holds a lease, and whether a holder that ran on this machine is gone.
//!
//! A holder is named `host:pid:random`. Beside it the lease line carries `pidns=`, the pid space
//! the pid belongs to: the pid namespace (`/proc/self/ns/pid`) and the kernel's boot id
//! (`/proc/sys/kernel/random/boot_id`). A pid means something only in its pid space: two
//! containers sharing a host name (host networking), or two machines both falling back to
//! `localhost`, see different processes behind one pid. So a holder counts as gone only when its
//! record names this host and this pid space, its pid is not this process's, and no process has
//! that pid (or only a zombie has it). Anything uncertain (an older record without `pidns=`, no
//! `/proc`, a pid reused by another process) leaves the lease to expire as before.

use std::io::ErrorKind;

/// This process, as a lease record names its holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    /// The host name, reduced to what a holder name may hold.
    pub host: String,
    /// The process id.
    pub pid: u32,
    /// The pid space, `<pid namespace inode>@<boot id>`; `None` where `/proc` cannot tell.
    pub pidns: Option<String>,
}

impl Process {
    /// This process, read from `/etc/hostname` and `/proc`.
    pub fn current() -> Self {
        Self {
            host: host_name(),
            pid: std::process::id(),
            pidns: pid_space(),
        }
    }

    /// The pid of `holder` when its record says it ran in this process's pid space on this
    /// host and no process runs under that pid any more; `None` otherwise (alive, elsewhere, or
    /// unknown). `alive` tells whether a pid runs here.
    pub fn gone_holder(
        &self,
        holder: &str,
        pidns: Option<&str>,
        alive: impl Fn(u32) -> bool,
    ) -> Option<u32> {
        let (host, pid) = host_and_pid(holder)?;
        let same_space = self.pidns.is_some() && self.pidns.as_deref() == pidns;
        (host == self.host && same_space && pid != self.pid && !alive(pid)).then_some(pid)
    }
}

/// `host:pid:random`: unique per process, readable by an admin.
pub fn holder_id() -> String {
    let me = Process::current();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let random = u64::from(nanos) ^ (u64::from(me.pid) << 32);
    format!("{}:{}:{random:x}", me.host, me.pid)
}

/// The host and pid a holder name `host:pid:random` gives; `None` for any other shape (a holder
/// named by hand or by a test).
fn host_and_pid(holder: &str) -> Option<(&str, u32)> {
    let mut parts = holder.split(':');
    let (host, pid, _random) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || host.is_empty() {
        return None;
    }
    Some((host, pid.parse().ok()?))
}

/// The host name from `/etc/hostname`, kept to letters, digits, `-` and `.` (a holder name is
/// one word of the lease line, and `:` separates its parts); `localhost` when there is none.
fn host_name() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    host.chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.'))
        .collect()
}

/// `<pid namespace inode>@<boot id>` of this process; `None` where `/proc` does not say.
fn pid_space() -> Option<String> {
    let link = std::fs::read_link("/proc/self/ns/pid").ok()?;
    // The link reads `pid:[4026531836]`.
    let inode: String = link
        .to_string_lossy()
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let boot: String = boot
        .trim()
        .chars()
        .filter(|c| c.is_ascii_hexdigit() || *c == '-')
        .collect();
    (!inode.is_empty() && !boot.is_empty()).then(|| format!("{inode}@{boot}"))
}

/// Whether a process with this pid runs in this pid namespace: its `/proc` entry exists and it
/// is not a zombie (killed, not yet reaped). Unsure (no `/proc`, unreadable) counts as alive.
pub fn alive(pid: u32) -> bool {
    if std::fs::metadata("/proc/self").is_err() {
        return true;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(e) if e.kind() == ErrorKind::NotFound => false,
        Err(_) => true,
        // `pid (comm) S ...`: the state follows the last `)` (comm may hold one).
        Ok(stat) => !stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| matches!(state, 'Z' | 'X')),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> Process {
        Process {
            host: "pve-admin".into(),
            pid: 100,
            pidns: Some("4026531836@b1".into()),
        }
    }

    #[test]
    fn only_a_dead_holder_of_this_host_and_pid_space_is_gone() {
        let here = Some("4026531836@b1");
        let dead = |_| false;
        let live = |_| true;
        // Name, holder, its pidns, whether its pid runs, the pid judged gone.
        type Case<'a> = (&'a str, &'a str, Option<&'a str>, bool, Option<u32>);
        let cases: [Case<'_>; 9] = [
            (
                "dead, this host, this pid space",
                "pve-admin:42:ab",
                here,
                false,
                Some(42),
            ),
            ("alive", "pve-admin:42:ab", here, true, None),
            ("another host", "other:42:ab", here, false, None),
            (
                "another pid namespace",
                "pve-admin:42:ab",
                Some("4026532000@b1"),
                false,
                None,
            ),
            (
                "after a reboot",
                "pve-admin:42:ab",
                Some("4026531836@b2"),
                false,
                None,
            ),
            (
                "an older record without pidns",
                "pve-admin:42:ab",
                None,
                false,
                None,
            ),
            ("this process's pid", "pve-admin:100:cd", here, false, None),
            ("not host:pid:random", "pve-admin:42", here, false, None),
            (
                "a pid that is no number",
                "pve-admin:x:ab",
                here,
                false,
                None,
            ),
        ];
        for (name, holder, pidns, is_alive, want) in cases {
            let got = if is_alive {
                me().gone_holder(holder, pidns, live)
            } else {
                me().gone_holder(holder, pidns, dead)
            };
            assert_eq!(got, want, "{name}");
        }
        let unknown = Process {
            pidns: None,
            ..me()
        };
        assert_eq!(
            unknown.gone_holder("pve-admin:42:ab", None, dead),
            None,
            "no pid space known here: never judged gone"
        );
    }

    #[test]
    fn this_process_is_alive_and_names_itself() {
        let me = Process::current();
        assert!(alive(me.pid));
        let id = holder_id();
        assert_eq!(host_and_pid(&id), Some((me.host.as_str(), me.pid)));
    }
}
