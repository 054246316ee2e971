//! The client's one error type: what Proxmox answered, or why no answer came.
//!
//! Proxmox errors keep their HTTP status, message and per-parameter `errors`, and are classified
//! ([`ApiErrorKind`]) so callers can branch: a locked VM is retried later, a checksum mismatch is
//! re-read, "already exists" takes a new VMID. No variant ever holds a secret.

use std::collections::BTreeMap;
use std::fmt;

/// Why a call to the Proxmox API failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Proxmox answered with an error status.
    #[error(
        "{method} {endpoint}: {kind} (HTTP {status}): {message}{}",
        fmt_errors(errors)
    )]
    Api {
        /// HTTP method of the call.
        method: String,
        /// API path of the call (`/nodes/pve1/qemu/105/migrate`).
        endpoint: String,
        /// HTTP status (59x are pveproxy's pseudo codes for an unreachable node).
        status: u16,
        /// What kind of failure it is.
        kind: ApiErrorKind,
        /// Proxmox's message (the body's `message`, else the reason phrase), trailing newline cut.
        message: String,
        /// Per-parameter reasons of a 400 "Parameter verification failed.".
        errors: BTreeMap<String, String>,
    },
    /// No connection could be made (refused, unreachable, DNS, connect timeout): nothing was sent.
    #[error("cannot connect to {host}: {message}")]
    Connect {
        /// `host:port`.
        host: String,
        /// What went wrong.
        message: String,
    },
    /// The TLS handshake failed (certificate not trusted, fingerprint mismatch): nothing was sent.
    #[error("TLS handshake with {host} failed: {message}")]
    Tls {
        /// `host:port`.
        host: String,
        /// What went wrong.
        message: String,
    },
    /// The request was sent but no answer came in time; a write may have happened.
    #[error("{method} {endpoint} on {host} timed out")]
    Timeout {
        /// HTTP method of the call.
        method: String,
        /// API path of the call.
        endpoint: String,
        /// `host:port`.
        host: String,
    },
    /// The connection broke after the request may have been sent.
    #[error("{method} {endpoint} on {host} failed: {message}")]
    Transport {
        /// HTTP method of the call.
        method: String,
        /// API path of the call.
        endpoint: String,
        /// `host:port`.
        host: String,
        /// What went wrong.
        message: String,
    },
    /// The answer was not the shape the endpoint returns.
    #[error("bad response from {endpoint}: {message}")]
    BadResponse {
        /// API path of the call.
        endpoint: String,
        /// What was wrong with it (serde's message with the JSON position).
        message: String,
    },
    /// Parameters could not be encoded into a request.
    #[error("cannot encode the request to {endpoint}: {message}")]
    Request {
        /// API path of the call.
        endpoint: String,
        /// What was wrong.
        message: String,
    },
    /// A task stopped with an exit status other than `OK` or `WARNINGS: n`.
    #[error("task {upid} failed: {exitstatus}{}", fmt_log(log))]
    TaskFailed {
        /// The task's UPID.
        upid: String,
        /// Its exit status (the error text from `TASK ERROR: ...`).
        exitstatus: String,
        /// The last lines of its log.
        log: Vec<String>,
    },
    /// A task was still running when the wait's deadline passed.
    #[error("task {upid} still running after {waited_secs} s")]
    TaskTimeout {
        /// The task's UPID.
        upid: String,
        /// How long it was waited for.
        waited_secs: u64,
    },
    /// The zone configuration is unusable; `key` names the offending setting.
    #[error("zone config: {key}: {message}")]
    Config {
        /// The config key (`hosts[1]`, `token-secret-env`, `fingerprint`).
        key: String,
        /// What is wrong with it.
        message: String,
    },
    /// A secret could not be read from its environment variable or file (the value is never shown).
    #[error("cannot read the {what} from {origin}: {message}")]
    Secret {
        /// Which secret (`token secret`, `password`).
        what: String,
        /// `environment variable NAME` or `file /path`.
        origin: String,
        /// What went wrong.
        message: String,
    },
}

/// The kinds of error answers Proxmox gives, told apart by status and message.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ApiErrorKind {
    /// 500 "VM is locked (migrate)": the config lock named.
    Locked {
        /// The lock (`migrate`, `backup`, `clone`, ...).
        lock: String,
    },
    /// 500 "checksum mismatch (file change by other user?)" or "detected modified configuration":
    /// the digest sent is stale.
    ChecksumMismatch,
    /// "VM 2004 already exists" / "config file already exists": take another VMID.
    AlreadyExists,
    /// 401: unknown or wrong credentials, expired ticket, bad CSRF token.
    AuthFailed,
    /// 403 `Permission check failed (<path>, <privilege>)`.
    PermissionDenied,
    /// The object does not exist ("Configuration file ... does not exist", "no such task", 404).
    NotFound,
    /// 400: a parameter is missing or invalid (see `errors`).
    InvalidParameters,
    /// 501: the method or path is not implemented.
    NotImplemented,
    /// 595-599: pveproxy could not reach the node the call is proxied to.
    ProxyUnreachable,
    /// Another 5xx failure.
    Server,
    /// Any other status.
    Other,
}

impl fmt::Display for ApiErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Locked { lock } => write!(f, "guest locked ({lock})"),
            Self::ChecksumMismatch => f.write_str("checksum mismatch"),
            Self::AlreadyExists => f.write_str("already exists"),
            Self::AuthFailed => f.write_str("authentication failed"),
            Self::PermissionDenied => f.write_str("permission denied"),
            Self::NotFound => f.write_str("not found"),
            Self::InvalidParameters => f.write_str("invalid parameters"),
            Self::NotImplemented => f.write_str("not implemented"),
            Self::ProxyUnreachable => f.write_str("node unreachable through proxy"),
            Self::Server => f.write_str("server error"),
            Self::Other => f.write_str("error"),
        }
    }
}

impl ApiErrorKind {
    /// Classifies an error answer from its status, message and per-parameter errors.
    pub fn classify(status: u16, message: &str, errors: &BTreeMap<String, String>) -> Self {
        let texts = || std::iter::once(message).chain(errors.values().map(String::as_str));
        if status == 401 {
            return Self::AuthFailed;
        }
        if status == 403 {
            return Self::PermissionDenied;
        }
        if let Some(lock) = texts().find_map(locked_by) {
            return Self::Locked { lock };
        }
        // Guest configs say "checksum mismatch"; node configs (PVE::Tools::assert_if_modified)
        // "detected modified configuration - file changed by other user? Try again.".
        if texts().any(|t| {
            t.contains("checksum mismatch") || t.contains("detected modified configuration")
        }) {
            return Self::ChecksumMismatch;
        }
        if texts().any(|t| t.contains("already exists")) {
            return Self::AlreadyExists;
        }
        if status == 404
            || texts().any(|t| t.contains("does not exist") || t.starts_with("no such "))
        {
            return Self::NotFound;
        }
        match status {
            400 => Self::InvalidParameters,
            501 => Self::NotImplemented,
            595..=599 => Self::ProxyUnreachable,
            500..=599 => Self::Server,
            _ => Self::Other,
        }
    }
}

/// The lock named in "VM is locked (migrate)" or "CT is locked (backup)".
fn locked_by(text: &str) -> Option<String> {
    let start = text.find(" is locked (")? + " is locked (".len();
    let end = text[start..].find(')')? + start;
    Some(text[start..end].to_owned())
}

fn fmt_errors(errors: &BTreeMap<String, String>) -> String {
    errors.iter().map(|(k, v)| format!("; {k}: {v}")).collect()
}

fn fmt_log(log: &[String]) -> String {
    if log.is_empty() {
        String::new()
    } else {
        format!(" (log: {})", log.join(" | "))
    }
}

impl Error {
    /// The kind of a Proxmox error answer; `None` for transport and local errors.
    pub fn kind(&self) -> Option<&ApiErrorKind> {
        match self {
            Self::Api { kind, .. } => Some(kind),
            _ => None,
        }
    }

    /// The HTTP status of a Proxmox error answer.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Whether the guest is locked (by a migration, backup, clone, ...).
    pub fn is_locked(&self) -> bool {
        matches!(self.kind(), Some(ApiErrorKind::Locked { .. }))
    }

    /// Whether a digest-guarded write lost a race.
    pub fn is_checksum_mismatch(&self) -> bool {
        matches!(self.kind(), Some(ApiErrorKind::ChecksumMismatch))
    }

    /// Whether the object (a VMID) already exists.
    pub fn is_already_exists(&self) -> bool {
        matches!(self.kind(), Some(ApiErrorKind::AlreadyExists))
    }

    /// Whether the object does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self.kind(), Some(ApiErrorKind::NotFound))
    }

    /// Whether the request may have reached the server without an answer (a write may be done).
    pub fn may_have_been_applied(&self) -> bool {
        matches!(self, Self::Timeout { .. } | Self::Transport { .. })
    }
}

/// Result with the client's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Builds the [`Error::Api`] of an error answer from its status, reason phrase and body.
///
/// The body is Proxmox's `{"data":null,"message":"...\n","errors":{...}}`, or empty (401).
pub fn api_error(method: &str, endpoint: &str, status: u16, reason: &str, body: &[u8]) -> Error {
    #[derive(serde::Deserialize, Default)]
    struct Body {
        #[serde(default, deserialize_with = "flxp_core::lenient::string")]
        message: Option<String>,
        #[serde(default)]
        errors: Option<BTreeMap<String, serde_json::Value>>,
    }
    let parsed: Body = serde_json::from_slice(body).unwrap_or_default();
    let message = parsed
        .message
        .map(|m| m.trim_end().to_owned())
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| reason.to_owned());
    let errors: BTreeMap<String, String> = parsed
        .errors
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| {
            let text = match v {
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            };
            (k, text.trim_end().to_owned())
        })
        .collect();
    let kind = ApiErrorKind::classify(status, &message, &errors);
    Error::Api {
        method: method.to_owned(),
        endpoint: endpoint.to_owned(),
        status,
        kind,
        message,
        errors,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classify(status: u16, reason: &str, body: &str) -> Error {
        api_error(
            "POST",
            "/nodes/pve1/qemu/105/migrate",
            status,
            reason,
            body.as_bytes(),
        )
    }

    fn locked(lock: &str) -> ApiErrorKind {
        ApiErrorKind::Locked { lock: lock.into() }
    }

    #[test]
    fn a_locked_vm_is_told_apart_with_its_lock() {
        let e = classify(
            500,
            "VM is locked (migrate)",
            r#"{"data":null,"message":"VM is locked (migrate)\n"}"#,
        );
        assert_eq!(e.kind(), Some(&locked("migrate")));
        assert!(e.is_locked());
        assert_eq!(
            e.to_string(),
            "POST /nodes/pve1/qemu/105/migrate: guest locked (migrate) (HTTP 500): VM is locked (migrate)"
        );
        let ct = classify(
            500,
            "x",
            r#"{"data":null,"message":"CT is locked (backup)\n"}"#,
        );
        assert_eq!(ct.kind(), Some(&locked("backup")));
    }

    #[test]
    fn checksum_mismatch_and_missing_config() {
        let e = classify(
            500,
            "checksum mismatch (file change by other user?)",
            r#"{"data":null,"message":"checksum mismatch (file change by other user?)\n"}"#,
        );
        assert!(e.is_checksum_mismatch());
        let node = "detected modified configuration - file changed by other user? Try again.";
        let e = classify(
            500,
            node,
            &format!(r#"{{"data":null,"message":"{node}\n"}}"#),
        );
        assert!(e.is_checksum_mismatch(), "a node config's stale digest");
        let e = classify(
            500,
            "x",
            r#"{"data":null,"message":"Configuration file 'nodes/pve2/qemu-server/105.conf' does not exist\n"}"#,
        );
        assert!(e.is_not_found());
    }

    #[test]
    fn parameter_errors_keep_the_errors_map_and_spot_already_exists() {
        let e = classify(
            400,
            "Parameter verification failed.",
            r#"{"errors":{"vmid":"VM 2004 already exists\n"},"data":null,"message":"Parameter verification failed.\n"}"#,
        );
        assert!(e.is_already_exists());
        let Error::Api {
            errors,
            status,
            message,
            ..
        } = &e
        else {
            panic!("{e:?}");
        };
        assert_eq!(*status, 400);
        assert_eq!(message, "Parameter verification failed.");
        assert_eq!(errors["vmid"], "VM 2004 already exists");
        let e = classify(
            400,
            "Parameter verification failed.",
            r#"{"errors":{"target":"target is local node."},"data":null,"message":"Parameter verification failed.\n"}"#,
        );
        assert_eq!(e.kind(), Some(&ApiErrorKind::InvalidParameters));
        assert!(
            e.to_string().ends_with("; target: target is local node."),
            "{e}"
        );
        let e = classify(
            500,
            "x",
            r#"{"data":null,"message":"unable to create VM 105: config file already exists\n"}"#,
        );
        assert!(e.is_already_exists());
    }

    #[test]
    fn auth_failure_has_an_empty_body_and_takes_the_reason_phrase() {
        let e = classify(401, "Authentication failed!", "");
        assert_eq!(e.kind(), Some(&ApiErrorKind::AuthFailed));
        let Error::Api { message, .. } = &e else {
            panic!("{e:?}");
        };
        assert_eq!(message, "Authentication failed!");
        let csrf = classify(401, "Permission denied - invalid csrf token", "");
        assert_eq!(csrf.kind(), Some(&ApiErrorKind::AuthFailed));
    }

    #[test]
    fn permission_proxy_and_unknown_paths() {
        let e = classify(
            403,
            "Permission check failed (/vms/105, VM.Migrate)",
            r#"{"data":null,"message":"Permission check failed (/vms/105, VM.Migrate)\n"}"#,
        );
        assert_eq!(e.kind(), Some(&ApiErrorKind::PermissionDenied));
        assert_eq!(
            classify(595, "Connection refused", "").kind(),
            Some(&ApiErrorKind::ProxyUnreachable)
        );
        assert_eq!(
            classify(501, "Method 'GET /foo' not implemented", "").kind(),
            Some(&ApiErrorKind::NotImplemented)
        );
        assert_eq!(
            classify(400, "x", r#"{"data":null,"errors":{"upid":"no such task"},"message":"Parameter verification failed.\n"}"#)
                .kind(),
            Some(&ApiErrorKind::NotFound)
        );
        assert_eq!(
            classify(503, "Service Unavailable", "").kind(),
            Some(&ApiErrorKind::Server)
        );
    }

    #[test]
    fn task_failures_show_the_last_log_lines() {
        let e = Error::TaskFailed {
            upid: "UPID:pve1:00000001:00000001:6929A5C0:qmigrate:105:root@pam:".into(),
            exitstatus: "can't migrate running VM without --online".into(),
            log: vec![
                "starting migration".into(),
                "TASK ERROR: can't migrate".into(),
            ],
        };
        assert!(
            e.to_string()
                .ends_with("(log: starting migration | TASK ERROR: can't migrate)")
        );
    }
}
