//! Credentials: an API token (recommended) or a user and password that log in for a ticket.
//!
//! Tokens go in `Authorization: PVEAPIToken=USER@REALM!ID=SECRET` on every call and need no CSRF
//! token. A ticket (`POST /access/ticket`) goes in the `PVEAuthCookie` cookie, writes add the
//! `CSRFPreventionToken` header, and it is renewed before its two hours run out.

use tokio::time::{Duration, Instant};

use crate::Secret;

/// Lifetime of a Proxmox ticket.
pub const TICKET_LIFETIME: Duration = Duration::from_secs(2 * 3600);

/// How the client authenticates; secrets are redacted in `Debug`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Credentials {
    /// An API token: `USER@REALM!TOKENID` and its secret (a UUID).
    Token {
        /// `USER@REALM!TOKENID`.
        id: String,
        /// The token secret.
        secret: Secret,
    },
    /// A user that logs in for a ticket.
    Password {
        /// `USER@REALM`.
        username: String,
        /// The password.
        password: Secret,
    },
}

impl Credentials {
    /// The value of the `Authorization` header of a token, `None` for password logins.
    pub(crate) fn token_header(&self) -> Option<Secret> {
        match self {
            Self::Token { id, secret } => {
                Some(Secret::new(format!("PVEAPIToken={id}={}", secret.expose())))
            }
            Self::Password { .. } => None,
        }
    }
}

/// What is wrong with a token id; the message says it in Proxmox's terms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenIdError {
    /// No `!` between the user and the token name.
    #[error("expected USER@REALM!TOKENID (no '!' found)")]
    NoBang,
    /// No `@` between the user name and the realm.
    #[error("expected USER@REALM!TOKENID (no '@' found)")]
    NoAt,
    /// The user name is empty or holds a character Proxmox refuses.
    #[error("user {0:?} is empty or holds whitespace, ':' or '/'")]
    User(String),
    /// The realm is not an identifier.
    #[error("realm {0:?} is not a valid realm name")]
    Realm(String),
    /// The token part holds `=`: the secret was pasted with the id (`USER@REALM!TOKENID=SECRET`).
    /// The message never shows the value.
    #[error(
        "holds '=', as USER@REALM!TOKENID=SECRET does: give only USER@REALM!TOKENID here, and the secret with \
         token-secret, token-secret-env or token-secret-file (the value is not shown)"
    )]
    WithSecret,
    /// The token name is not an identifier.
    #[error(
        "token id {0:?} must be at least 2 characters, start with a letter and hold only letters, digits, '.', '-', '_'"
    )]
    Token(String),
}

/// Checks a token id `USER@REALM!TOKENID` against Proxmox's formats.
pub fn validate_token_id(id: &str) -> Result<(), TokenIdError> {
    let (userid, token) = id.rsplit_once('!').ok_or(TokenIdError::NoBang)?;
    // Checked first: every other error quotes the part it is about.
    if token.contains('=') {
        return Err(TokenIdError::WithSecret);
    }
    let (user, realm) = userid.rsplit_once('@').ok_or(TokenIdError::NoAt)?;
    if user.is_empty() || user.contains(|c: char| c.is_whitespace() || c == ':' || c == '/') {
        return Err(TokenIdError::User(user.to_owned()));
    }
    let ident = |s: &str| {
        let mut chars = s.chars();
        chars.next().is_some_and(|c| c.is_ascii_alphabetic())
            && s.len() >= 2
            && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
    };
    if !ident(realm) {
        return Err(TokenIdError::Realm(realm.to_owned()));
    }
    if !ident(token) {
        return Err(TokenIdError::Token(token.to_owned()));
    }
    Ok(())
}

/// A ticket obtained by logging in, with when it was obtained.
#[derive(Debug, Clone)]
pub(crate) struct Ticket {
    /// Cookie value of `PVEAuthCookie`.
    pub ticket: Secret,
    /// Header value of `CSRFPreventionToken`.
    pub csrf: Secret,
    /// When Proxmox issued it (as far as this process knows).
    pub obtained: Instant,
}

impl Ticket {
    /// Whether the ticket should be renewed before it is used again.
    pub fn is_due(&self, renew_after: Duration) -> bool {
        self.obtained.elapsed() >= renew_after
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic on malformed fixtures: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn token_header_has_the_proxmox_shape_and_debug_hides_the_secret() {
        let c = Credentials::Token {
            id: "root@pam!flxp".into(),
            secret: Secret::new("0f3b6c1e-1111-2222-3333-444455556666"),
        };
        assert_eq!(
            c.token_header().unwrap().expose(),
            "PVEAPIToken=root@pam!flxp=0f3b6c1e-1111-2222-3333-444455556666"
        );
        assert!(!format!("{c:?}").contains("0f3b6c1e"));
        let p = Credentials::Password {
            username: "flxp@pve".into(),
            password: Secret::new("hunter2"),
        };
        assert!(p.token_header().is_none());
        assert!(!format!("{p:?}").contains("hunter2"));
    }

    #[test]
    fn token_ids_are_checked() {
        assert!(validate_token_id("root@pam!flxp").is_ok());
        assert!(validate_token_id("svc.flxp@pve!sched-01").is_ok());
        for (id, want) in [
            ("root@pam", "no '!'"),
            ("root!flxp", "no '@'"),
            ("@pam!flxp", "user"),
            ("root@p!flxp", "realm"),
            ("root@pam!1x", "token id"),
            ("root@pam!fl/xp", "token id"),
        ] {
            let e = validate_token_id(id).unwrap_err().to_string();
            assert!(e.contains(want), "{id}: {e}");
        }
    }

    /// `USER@REALM!TOKENID=SECRET` pasted whole (the form `flxp sim --token` takes) is refused
    /// without quoting the secret.
    #[test]
    fn a_token_id_with_its_secret_is_refused_without_showing_it() {
        let e =
            validate_token_id("root@pam!flxp=11111111-2222-3333-4444-555555555555").unwrap_err();
        assert_eq!(e, TokenIdError::WithSecret);
        let message = e.to_string();
        assert!(!message.contains("1111"), "{message}");
        assert!(message.contains("token-secret-file"), "{message}");
    }
}
