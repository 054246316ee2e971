//! `/access/ticket` (password login) and `/access/permissions`.
//!
//! Passwords, tickets and CSRF tokens are [`Secret`]s: their `Debug` is redacted, so these types
//! can be logged without leaking credentials.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

use flxp_core::lenient;

use super::quirks::string_required;
use crate::Secret;

/// Body of `POST /access/ticket`. `password` may also be a still-valid ticket, to renew it.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TicketRequest {
    /// `user@realm`.
    #[serde(deserialize_with = "string_required")]
    pub username: String,
    /// The password (or a ticket to renew).
    pub password: Secret,
    /// Realm, when `username` has none.
    #[serde(default, with = "lenient::opt")]
    pub realm: Option<String>,
    /// One-time password for two-factor logins.
    #[serde(default)]
    pub otp: Option<Secret>,
}

/// Answer of `POST /access/ticket`.
#[serde_with::apply(Option => #[serde(with = "lenient::opt")])]
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TicketResponse {
    /// The authenticated `user@realm`.
    #[serialize_always]
    pub username: Option<String>,
    /// `PVE:<user>@<realm>:<HEXTIME>::<signature>`, valid 2 hours; sent as cookie `PVEAuthCookie`.
    #[serde_with(skip_apply)]
    pub ticket: Option<Secret>,
    /// Header `CSRFPreventionToken` for every write made with the ticket.
    #[serde(rename = "CSRFPreventionToken")]
    #[serde_with(skip_apply)]
    pub csrf_prevention_token: Option<Secret>,
    /// Cluster name.
    pub clustername: Option<String>,
    /// Computed capabilities, as sent.
    #[serde_with(skip_apply)]
    pub cap: Option<serde_json::Value>,
    /// Set when a second factor is still required (the ticket is then only a TFA challenge).
    #[serde(rename = "NeedTFA")]
    pub need_tfa: Option<bool>,
}

/// Query of `GET /access/permissions`.
#[serde_with::apply(Option => #[serde(with = "lenient::opt")])]
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PermissionsQuery {
    /// Only this ACL path (`/`, `/vms/105`).
    pub path: Option<String>,
    /// Another user or token to ask about (needs `Sys.Audit`).
    pub userid: Option<String>,
}

/// `GET /access/permissions`: ACL path → privilege → whether it propagates to sub-paths.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Permissions(pub BTreeMap<String, BTreeMap<String, u8>>);

impl Permissions {
    /// Whether `privilege` is granted on exactly `path` (no inheritance computed: Proxmox already
    /// lists every path the caller has rights on).
    pub fn has(&self, path: &str, privilege: &str) -> bool {
        self.0.get(path).is_some_and(|p| p.contains_key(privilege))
    }
}

impl<'de> Deserialize<'de> for Permissions {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Flag(#[serde(deserialize_with = "lenient::bool")] Option<bool>);
        let raw: BTreeMap<String, BTreeMap<String, Flag>> =
            Option::deserialize(d)?.unwrap_or_default();
        Ok(Self(
            raw.into_iter()
                .map(|(path, privs)| {
                    let privs = privs
                        .into_iter()
                        .map(|(p, Flag(f))| (p, u8::from(f.unwrap_or(false))))
                        .collect();
                    (path, privs)
                })
                .collect(),
        ))
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic on malformed fixtures: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::types::form::to_form;

    #[test]
    fn ticket_request_is_form_encoded_but_never_debug_printed() {
        let r = TicketRequest {
            username: "flxp@pve".into(),
            password: Secret::new("s3cr;et=pw"),
            realm: None,
            otp: None,
        };
        assert_eq!(
            to_form(&r).unwrap(),
            "username=flxp%40pve&password=s3cr%3Bet%3Dpw"
        );
        let dbg = format!("{r:?}");
        assert!(!dbg.contains("s3cr"), "{dbg}");
    }

    #[test]
    fn ticket_response_reads_the_reference_shape_and_redacts() {
        let r: TicketResponse = serde_json::from_str(
            r#"{"username":"root@pam","ticket":"PVE:root@pam:6929A5C0::c2lnbmF0dXJl",
                "CSRFPreventionToken":"6929A5C0:Y3NyZg","clustername":"lab","cap":{"vms":{}}}"#,
        )
        .unwrap();
        assert_eq!(
            r.ticket.as_ref().unwrap().expose(),
            "PVE:root@pam:6929A5C0::c2lnbmF0dXJl"
        );
        assert_eq!(
            r.csrf_prevention_token.as_ref().unwrap().expose(),
            "6929A5C0:Y3NyZg"
        );
        let dbg = format!("{r:?}");
        assert!(
            !dbg.contains("c2lnbmF0dXJl") && !dbg.contains("Y3NyZg"),
            "{dbg}"
        );
        let tfa: TicketResponse =
            serde_json::from_str(r#"{"username":"a@pve","ticket":"x","NeedTFA":1}"#).unwrap();
        assert_eq!(tfa.need_tfa, Some(true));
    }

    #[test]
    fn permissions_read_zero_one_flags() {
        let p: Permissions = serde_json::from_str(
            r#"{"/":{"Sys.Audit":1,"VM.Migrate":"1"},"/vms/105":{"VM.Config.Options":0}}"#,
        )
        .unwrap();
        assert!(p.has("/", "Sys.Audit"));
        assert!(p.has("/vms/105", "VM.Config.Options"));
        assert!(!p.has("/", "Sys.Console"));
        assert_eq!(
            serde_json::to_string(&p).unwrap(),
            r#"{"/":{"Sys.Audit":1,"VM.Migrate":1},"/vms/105":{"VM.Config.Options":0}}"#
        );
    }
}
