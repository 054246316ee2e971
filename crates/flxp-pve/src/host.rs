//! API hosts of a cluster: `host`, `host:port`, `[v6]:port`, optionally `http://` or `https://`.

use std::fmt;
use std::str::FromStr;

/// Proxmox's API port.
pub const DEFAULT_PORT: u16 = 8006;

/// One API endpoint of a cluster (any node answers any call).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// `https` (the default) or `http` (only for the simulator's `--http` mode).
    pub scheme: &'static str,
    /// Host name or IP address (IPv6 without brackets).
    pub name: String,
    /// TCP port.
    pub port: u16,
}

impl Host {
    /// The base URL of the JSON API on this host: `https://host:port/api2/json`.
    pub fn base_url(&self) -> String {
        if self.name.contains(':') {
            format!("{}://[{}]:{}/api2/json", self.scheme, self.name, self.port)
        } else {
            format!("{}://{}:{}/api2/json", self.scheme, self.name, self.port)
        }
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.name.contains(':') {
            write!(f, "[{}]:{}", self.name, self.port)
        } else {
            write!(f, "{}:{}", self.name, self.port)
        }
    }
}

/// Why a text is not a host.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// The text holds `user:password@`; it is never shown.
    #[error(
        "credentials in a host (`user:password@`) are not read and the value is not \
         shown: give the host alone, and the token or user in the zone's auth keys"
    )]
    Credentials,
    /// A scheme other than https or http.
    #[error("{text:?}: only https:// (or http:// for the simulator) is supported")]
    Scheme {
        /// The host as given.
        text: String,
    },
    /// Nothing but a scheme or slashes.
    #[error("empty host")]
    Empty,
    /// A path after the host.
    #[error("{text:?}: give a host or host:port, not a path")]
    Path {
        /// The host as given.
        text: String,
    },
    /// A port that is not 1 to 65535.
    #[error("{text:?}: port {port:?} is not a number from 1 to 65535")]
    Port {
        /// The host as given.
        text: String,
        /// The port as given.
        port: String,
    },
    /// `[` without `]`.
    #[error("{text:?}: missing ']' after the IPv6 address")]
    MissingBracket {
        /// The host as given.
        text: String,
    },
    /// Something other than `:port` after `]`.
    #[error("{text:?}: expected ':port' after ']'")]
    AfterBracket {
        /// The host as given.
        text: String,
    },
    /// An empty name or one with white space.
    #[error("{text:?}: invalid host name")]
    Name {
        /// The host as given.
        text: String,
    },
}

impl FromStr for Host {
    type Err = HostError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        // `user:password@host` is refused before anything echoes the text: it may hold a password.
        if s.contains('@') {
            return Err(HostError::Credentials);
        }
        let (scheme, rest) = if let Some(r) = s.strip_prefix("https://") {
            ("https", r)
        } else if let Some(r) = s.strip_prefix("http://") {
            ("http", r)
        } else if s.contains("://") {
            return Err(HostError::Scheme { text: s.to_owned() });
        } else {
            ("https", s)
        };
        let rest = rest.trim_end_matches('/');
        if rest.is_empty() {
            return Err(HostError::Empty);
        }
        if rest.contains('/') {
            return Err(HostError::Path { text: s.to_owned() });
        }
        let port = |p: &str| {
            p.parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| HostError::Port {
                    text: s.to_owned(),
                    port: p.to_owned(),
                })
        };
        let (name, port) = if let Some(v6) = rest.strip_prefix('[') {
            let (name, after) = v6
                .split_once(']')
                .ok_or_else(|| HostError::MissingBracket { text: s.to_owned() })?;
            match after {
                "" => (name, DEFAULT_PORT),
                p => (
                    name,
                    port(
                        p.strip_prefix(':')
                            .ok_or_else(|| HostError::AfterBracket { text: s.to_owned() })?,
                    )?,
                ),
            }
        } else if rest.matches(':').count() > 1 {
            // A bare IPv6 address: no port can be told apart from it.
            (rest, DEFAULT_PORT)
        } else if let Some((name, p)) = rest.split_once(':') {
            (name, port(p)?)
        } else {
            (rest, DEFAULT_PORT)
        };
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Err(HostError::Name { text: s.to_owned() });
        }
        Ok(Self {
            scheme,
            name: name.to_owned(),
            port,
        })
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic on malformed fixtures: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn hosts_default_to_https_and_port_8006() {
        let h: Host = "pve1.example.com".parse().unwrap();
        assert_eq!(h.base_url(), "https://pve1.example.com:8006/api2/json");
        let h: Host = "10.0.0.2:8443".parse().unwrap();
        assert_eq!(h.base_url(), "https://10.0.0.2:8443/api2/json");
        let h: Host = "[fd00::2]:8006".parse().unwrap();
        assert_eq!(h.base_url(), "https://[fd00::2]:8006/api2/json");
        let h: Host = "fd00::2".parse().unwrap();
        assert_eq!(h.to_string(), "[fd00::2]:8006");
        let h: Host = "http://127.0.0.1:18006/".parse().unwrap();
        assert_eq!(h.base_url(), "http://127.0.0.1:18006/api2/json");
    }

    #[test]
    fn bad_hosts_say_why() {
        for (text, want) in [
            ("", "empty"),
            ("pve1:0", "port"),
            ("pve1:x", "port"),
            ("ftp://pve1", "only https"),
            ("pve1/api2", "not a path"),
            ("[fd00::1", "missing ']'"),
        ] {
            let e = text.parse::<Host>().unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    /// A password written into a host (`https://user:password@host`) is refused, and no error
    /// shows it, whatever else is wrong with the text.
    #[test]
    fn credentials_in_a_host_are_refused_without_showing_them() {
        for text in [
            "https://admin:SECRET@pve1:8006",
            "admin:SECRET@pve1",
            "ftp://admin:SECRET@pve1",
            "https://admin:SECRET@pve1/api2",
            "[fd00::1]:8006@SECRET",
        ] {
            let e = text.parse::<Host>().unwrap_err().to_string();
            assert!(e.contains("credentials in a host"), "{text}: {e}");
            assert!(!e.contains("SECRET"), "{text}: {e}");
        }
    }
}
