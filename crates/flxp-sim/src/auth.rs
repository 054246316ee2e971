//! Authentication as Proxmox does it: API tokens in `Authorization: PVEAPIToken=USER@REALM!ID=SECRET`
//! (split at the last `=`, a space accepted instead of the first `=`), and password login through
//! `POST /access/ticket` giving a signed ticket (cookie `PVEAuthCookie`, 2 hours) and a
//! `CSRFPreventionToken` that every write with a ticket must carry.
//!
//! Secrets never appear in `Debug` output, logs or errors.

use std::collections::{BTreeSet, HashMap};
use std::fmt;

use axum::http::HeaderMap;
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};
use serde_json::Value;
use subtle::ConstantTimeEq;

use crate::clock::wall_epoch;
use crate::world::hex;
use crate::{Error, Result};

/// How long a ticket is valid, seconds.
pub const TICKET_LIFETIME: u64 = 7200;

/// An API token the simulator accepts.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenSpec {
    /// `user@realm`.
    pub userid: String,
    /// The token name (after `!`).
    pub name: String,
    /// The secret (a UUID in Proxmox).
    pub secret: String,
    /// Whether it may only read.
    pub readonly: bool,
    /// The privileges it holds (granted on `/`), when a scenario gives them; `None` is every
    /// privilege (or every `*.Audit` one when `readonly`).
    pub privs: Option<BTreeSet<String>>,
}

impl fmt::Debug for TokenSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenSpec")
            .field("id", &self.full_id())
            .field("secret", &"<redacted>")
            .field("readonly", &self.readonly)
            .field("privs", &self.privs)
            .finish()
    }
}

impl TokenSpec {
    /// Parses `USER@REALM!TOKENID=SECRET` (split at the last `=`).
    pub fn parse(text: &str, readonly: bool) -> Result<Self> {
        // Every complaint names the whole form: a user fixing one part sees what the rest is.
        let bad = |message: &str| Error::Token {
            token: text
                .rsplit_once('=')
                .map(|(id, _)| id)
                .unwrap_or(text)
                .to_string(),
            message: format!("{message} (expected USER@REALM!TOKENID=SECRET)"),
        };
        let (id, secret) = text
            .rsplit_once('=')
            .ok_or_else(|| bad("no '=' before the secret"))?;
        let (userid, name) = id
            .split_once('!')
            .ok_or_else(|| bad("no '!' before the token id"))?;
        check_userid(userid).map_err(|e| bad(&e.to_string()))?;
        if !is_realm_like(name) {
            return Err(bad("the token id must match [A-Za-z][A-Za-z0-9.-_]+"));
        }
        if secret.is_empty() {
            return Err(bad("the secret is empty"));
        }
        Ok(TokenSpec {
            userid: userid.to_string(),
            name: name.to_string(),
            secret: secret.to_string(),
            readonly,
            privs: None,
        })
    }

    /// Reads a scenario entry: a token string or `{"token": "...", "readonly": true}` or
    /// `{"token": "...", "privs": ["Sys.Audit", "VM.Audit"]}` (a role's privileges, on `/`).
    pub fn from_value(v: &Value) -> std::result::Result<Self, TokenEntryError> {
        let mut privs = None;
        let (text, readonly) = match v {
            Value::String(s) => (s.as_str(), false),
            Value::Object(o) => {
                if let Some(k) = o
                    .keys()
                    .find(|k| !["token", "readonly", "privs"].contains(&k.as_str()))
                {
                    return Err(TokenEntryError::UnknownField(k.clone()));
                }
                if let Some(list) = o.get("privs") {
                    let names = list
                        .as_array()
                        .and_then(|a| a.iter().map(Value::as_str).collect::<Option<BTreeSet<_>>>())
                        .ok_or(TokenEntryError::Privs)?;
                    privs = Some(names.into_iter().map(str::to_owned).collect());
                }
                let text = o
                    .get("token")
                    .and_then(Value::as_str)
                    .ok_or(TokenEntryError::MissingToken)?;
                let readonly = match o.get("readonly") {
                    None => false,
                    Some(Value::Bool(b)) => *b,
                    Some(other) => return Err(TokenEntryError::Readonly(other.clone())),
                };
                (text, readonly)
            }
            other => return Err(TokenEntryError::Shape(other.clone())),
        };
        let mut spec =
            Self::parse(text, readonly).map_err(|e| TokenEntryError::Token(Box::new(e)))?;
        spec.privs = privs;
        Ok(spec)
    }

    /// A new token for `userid` named `name` with a random UUID secret.
    pub fn generate(userid: &str, name: &str) -> Self {
        TokenSpec {
            userid: userid.to_string(),
            name: name.to_string(),
            secret: random_uuid(),
            readonly: false,
            privs: None,
        }
    }

    /// `user@realm!name`.
    pub fn full_id(&self) -> String {
        format!("{}!{}", self.userid, self.name)
    }

    /// The scenario/`--token` form `user@realm!name=secret`.
    pub fn to_spec_string(&self) -> String {
        format!("{}={}", self.full_id(), self.secret)
    }

    /// The ready `Authorization` header value.
    pub fn header_value(&self) -> String {
        format!("PVEAPIToken={}", self.to_spec_string())
    }
}

/// Why a scenario's token entry is unusable; the message follows the entry's path.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenEntryError {
    /// An object key other than `token`, `readonly` and `privs`.
    #[error("unknown field `{0}`, expected `token`, `readonly` or `privs`")]
    UnknownField(String),
    /// `privs` is not a list of strings.
    #[error("`privs` must be a list of privilege names")]
    Privs,
    /// An object without `token`.
    #[error("missing field `token` (USER@REALM!TOKENID=SECRET)")]
    MissingToken,
    /// `readonly` is not a boolean.
    #[error("`readonly` must be true or false, got {0}")]
    Readonly(Value),
    /// Neither a string nor an object.
    #[error("expected a token string or object, got {0}")]
    Shape(Value),
    /// The token text itself is malformed.
    #[error(transparent)]
    Token(Box<Error>),
}

/// Why a `user@realm` is malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UseridError {
    /// No `@`.
    #[error("'{0}' is not USER@REALM")]
    NoRealm(String),
    /// An empty user, or one with white space, `:` or `/`.
    #[error("invalid user name in '{0}'")]
    User(String),
    /// A realm that does not match `[A-Za-z][A-Za-z0-9.-_]+`.
    #[error("invalid realm in '{0}'")]
    Realm(String),
}

/// Checks `user@realm` (user `[^\s:/]+`, realm `[A-Za-z][A-Za-z0-9.-_]+`).
pub fn check_userid(userid: &str) -> std::result::Result<(), UseridError> {
    let (user, realm) = userid
        .rsplit_once('@')
        .ok_or_else(|| UseridError::NoRealm(userid.to_owned()))?;
    if user.is_empty()
        || user
            .chars()
            .any(|c| c.is_whitespace() || c == ':' || c == '/')
    {
        return Err(UseridError::User(userid.to_owned()));
    }
    if !is_realm_like(realm) {
        return Err(UseridError::Realm(userid.to_owned()));
    }
    Ok(())
}

fn is_realm_like(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 2
        && b[0].is_ascii_alphabetic()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b'_'))
}

/// A random UUID (version 4 layout), as Proxmox token secrets look.
pub fn random_uuid() -> String {
    let mut b = [0u8; 16];
    // The system RNG does not fail on supported platforms; a zero UUID would still be unique
    // enough to notice in a test.
    let _ = SystemRandom::new().fill(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex(&b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Who made a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// `user@realm`.
    pub userid: String,
    /// The token name when authenticated by token.
    pub tokenid: Option<String>,
    /// Whether writes are refused (403).
    pub readonly: bool,
    /// Whether it came with a ticket (then writes need the CSRF token).
    pub by_ticket: bool,
    /// The privileges it holds when they are limited per token (checked on every endpoint).
    pub privs: Option<BTreeSet<String>>,
}

impl Principal {
    /// The user as it appears in UPIDs: `user@realm` or `user@realm!token`.
    pub fn task_user(&self) -> String {
        match &self.tokenid {
            Some(t) => format!("{}!{t}", self.userid),
            None => self.userid.clone(),
        }
    }
}

/// What the credentials of a request amount to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthOutcome {
    /// Valid credentials.
    Ok(Principal),
    /// No credentials at all (`401 No ticket`).
    Missing,
    /// Credentials that do not check out (`401 Authentication failed!`).
    Failed,
}

/// A user that may log in with a password.
#[derive(Clone)]
struct UserEntry {
    password: String,
    readonly: bool,
}

/// The simulator's credentials and signing key.
pub struct Auth {
    tokens: HashMap<String, TokenSpec>,
    users: HashMap<String, UserEntry>,
    key: hmac::Key,
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut tokens: Vec<&String> = self.tokens.keys().collect();
        tokens.sort();
        let mut users: Vec<&String> = self.users.keys().collect();
        users.sort();
        f.debug_struct("Auth")
            .field("tokens", &tokens)
            .field("users", &users)
            .finish_non_exhaustive()
    }
}

impl Auth {
    /// Credentials from tokens and `(userid, password, readonly)` users, with a fresh key.
    pub fn new(tokens: Vec<TokenSpec>, users: Vec<(String, String, bool)>) -> Self {
        let rng = SystemRandom::new();
        let key = hmac::Key::generate(hmac::HMAC_SHA256, &rng)
            .unwrap_or_else(|_| hmac::Key::new(hmac::HMAC_SHA256, random_uuid().as_bytes()));
        Auth {
            tokens: tokens.into_iter().map(|t| (t.full_id(), t)).collect(),
            users: users
                .into_iter()
                .map(|(u, password, readonly)| (u, UserEntry { password, readonly }))
                .collect(),
            key,
        }
    }

    /// The accepted token ids (no secrets).
    pub fn token_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.tokens.keys().cloned().collect();
        ids.sort();
        ids
    }

    /// Checks a request's `Authorization` header or `PVEAuthCookie`.
    pub fn check(&self, headers: &HeaderMap) -> AuthOutcome {
        if let Some(value) = headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
        {
            if let Some(rest) = value.strip_prefix("PVEAPIToken") {
                return self.check_token(rest);
            }
            if let Some(ticket) = value.strip_prefix("PVEAuthCookie=") {
                return self.check_ticket(ticket);
            }
            return AuthOutcome::Failed;
        }
        if let Some(ticket) = cookie(headers, "PVEAuthCookie") {
            return self.check_ticket(&ticket);
        }
        AuthOutcome::Missing
    }

    fn check_token(&self, rest: &str) -> AuthOutcome {
        // `PVEAPIToken=ID=SECRET` or `PVEAPIToken ID=SECRET`; the split is at the last `=`.
        let Some(rest) = rest.strip_prefix('=').or_else(|| rest.strip_prefix(' ')) else {
            return AuthOutcome::Failed;
        };
        let Some((id, secret)) = rest.trim().rsplit_once('=') else {
            return AuthOutcome::Failed;
        };
        match self.tokens.get(id) {
            Some(t) if constant_time_eq(t.secret.as_bytes(), secret.as_bytes()) => {
                AuthOutcome::Ok(Principal {
                    userid: t.userid.clone(),
                    tokenid: Some(t.name.clone()),
                    readonly: t.readonly,
                    by_ticket: false,
                    privs: t.privs.clone(),
                })
            }
            _ => AuthOutcome::Failed,
        }
    }

    fn check_ticket(&self, ticket: &str) -> AuthOutcome {
        let ticket = percent_encoding::percent_decode_str(ticket).decode_utf8_lossy();
        match self.verify_ticket(&ticket) {
            Some(userid) => {
                let readonly = self.users.get(&userid).is_some_and(|u| u.readonly);
                AuthOutcome::Ok(Principal {
                    userid,
                    tokenid: None,
                    readonly,
                    by_ticket: true,
                    privs: None,
                })
            }
            None => AuthOutcome::Failed,
        }
    }

    /// The user a valid, unexpired ticket belongs to.
    pub fn verify_ticket(&self, ticket: &str) -> Option<String> {
        let rest = ticket.strip_prefix("PVE:")?;
        let (payload, sig) = rest.rsplit_once("::")?;
        let (userid, hextime) = payload.rsplit_once(':')?;
        let expected = self.sign(&format!("PVE:{userid}:{hextime}"));
        if !constant_time_eq(expected.as_bytes(), sig.as_bytes()) {
            return None;
        }
        let issued = u64::from_str_radix(hextime, 16).ok()?;
        let now = wall_epoch();
        // Proxmox accepts tickets from slightly in the future (clock skew) and up to 2 h old.
        (issued <= now + 300 && now.saturating_sub(issued) < TICKET_LIFETIME)
            .then(|| userid.to_string())
    }

    /// Logs in: `username` (with `@realm`, or `realm` given) and a password or a valid ticket.
    /// Returns the principal, the ticket and the CSRF token.
    pub fn login(
        &self,
        username: &str,
        realm: Option<&str>,
        password: &str,
    ) -> Option<(Principal, String, String)> {
        let userid = match realm {
            Some(r) if !username.contains('@') => format!("{username}@{r}"),
            _ => username.to_string(),
        };
        let entry = self.users.get(&userid)?;
        let by_password = constant_time_eq(entry.password.as_bytes(), password.as_bytes());
        let by_ticket = password.starts_with("PVE:")
            && self.verify_ticket(password).as_deref() == Some(userid.as_str());
        if !(by_password || by_ticket) {
            return None;
        }
        let (ticket, csrf) = self.issue(&userid);
        Some((
            Principal {
                userid,
                tokenid: None,
                readonly: entry.readonly,
                by_ticket: true,
                privs: None,
            },
            ticket,
            csrf,
        ))
    }

    /// A fresh ticket and CSRF token for `userid`.
    pub fn issue(&self, userid: &str) -> (String, String) {
        let hextime = format!("{:08X}", wall_epoch());
        let payload = format!("PVE:{userid}:{hextime}");
        let ticket = format!("{payload}::{}", self.sign(&payload));
        let csrf = format!("{hextime}:{}", self.sign(&format!("{hextime}:{userid}")));
        (ticket, csrf)
    }

    /// Whether `token` is a valid CSRF prevention token for `userid`.
    pub fn verify_csrf(&self, userid: &str, token: &str) -> bool {
        let Some((hextime, sig)) = token.split_once(':') else {
            return false;
        };
        let expected = self.sign(&format!("{hextime}:{userid}"));
        let fresh = u64::from_str_radix(hextime, 16)
            .is_ok_and(|t| wall_epoch().saturating_sub(t) < TICKET_LIFETIME);
        fresh && constant_time_eq(expected.as_bytes(), sig.as_bytes())
    }

    fn sign(&self, data: &str) -> String {
        hex(hmac::sign(&self.key, data.as_bytes()).as_ref())
    }
}

/// Reads one cookie from the `Cookie` headers.
fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
}

/// Compares secrets without an early exit, so timing does not tell how much of a guess was right
/// (the length may show, as it does in Proxmox's own comparison).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may panic

    use axum::http::HeaderValue;

    use super::*;

    fn auth() -> Auth {
        Auth::new(
            vec![TokenSpec::parse("root@pam!flxp=s3cret", false).unwrap()],
            vec![("root@pam".into(), "pw".into(), false)],
        )
    }

    fn with(name: &str, value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
        h
    }

    #[test]
    fn tokens_split_at_the_last_equals_sign_and_accept_a_space() {
        let a = Auth::new(
            vec![TokenSpec::parse("root@pam!flxp=abc", false).unwrap()],
            vec![],
        );
        let ok = |v: &str| matches!(a.check(&with("authorization", v)), AuthOutcome::Ok(_));
        assert!(ok("PVEAPIToken=root@pam!flxp=abc"));
        assert!(ok("PVEAPIToken root@pam!flxp=abc"));
        assert!(!ok("PVEAPIToken=root@pam!flxp=abd"));
        assert!(!ok("PVEAPIToken=root@pam!other=abc"));
        // The split is at the last '=': a secret with '=' in it cannot be configured, and an
        // extra '=' in the header makes the id part wrong.
        assert!(TokenSpec::parse("root@pam!flxp=s3cr=et", false).is_err());
        let b = auth();
        assert_eq!(
            b.check(&with("authorization", "PVEAPIToken=root@pam!flxp=x=s3cret")),
            AuthOutcome::Failed
        );
        assert!(matches!(
            b.check(&with("authorization", "PVEAPIToken=root@pam!flxp=s3cret")),
            AuthOutcome::Ok(_)
        ));
        assert_eq!(a.check(&HeaderMap::new()), AuthOutcome::Missing);
    }

    #[test]
    fn token_specs_are_checked_and_redacted() {
        let t = TokenSpec::parse("root@pam!flxp=1234", false).unwrap();
        assert_eq!(t.header_value(), "PVEAPIToken=root@pam!flxp=1234");
        assert!(!format!("{t:?}").contains("1234"));
        for bad in [
            "root@pam=x",
            "root!flxp=x",
            "root@pam!f=x",
            "root@pam!flxp=",
        ] {
            assert!(TokenSpec::parse(bad, false).is_err(), "{bad}");
        }
        assert_eq!(random_uuid().len(), 36);
    }

    #[test]
    fn tickets_log_in_renew_and_carry_csrf() {
        let a = auth();
        assert!(a.login("root@pam", None, "wrong").is_none());
        assert!(a.login("nobody@pam", None, "pw").is_none());
        let (p, ticket, csrf) = a.login("root", Some("pam"), "pw").unwrap();
        assert_eq!(p.userid, "root@pam");
        assert!(a.verify_csrf("root@pam", &csrf));
        assert!(!a.verify_csrf("other@pam", &csrf));
        let cookie = with("cookie", &format!("x=1; PVEAuthCookie={ticket}"));
        assert!(matches!(a.check(&cookie), AuthOutcome::Ok(p) if p.by_ticket));
        assert!(
            a.login("root@pam", None, &ticket).is_some(),
            "a ticket renews itself"
        );
        let forged = ticket.replace("root@pam", "admin@pam");
        assert_eq!(
            a.check(&with("cookie", &format!("PVEAuthCookie={forged}"))),
            AuthOutcome::Failed
        );
    }
}
