//! `/pools` and `/pools/{poolid}`: resource pools and their members.
//!
//! Members have the shape of `/cluster/resources` entries, so they are
//! [`Resource`]s.

use serde::{Deserialize, Serialize};

use flxp_core::lenient;
use flxp_core::snapshot::Resource;

use super::quirks::{string_required, vec_or_null};

/// One entry of `GET /pools`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PoolListEntry {
    /// Pool id.
    #[serde(deserialize_with = "string_required")]
    pub poolid: String,
    /// Free-text comment.
    #[serde(
        default,
        with = "lenient::opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub comment: Option<String>,
    /// Members, when the list was asked for them.
    #[serde(
        default,
        deserialize_with = "vec_or_null",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub members: Vec<Resource>,
}

/// `GET /pools/{poolid}`: a pool's comment and members.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Pool {
    /// Free-text comment.
    #[serde(with = "lenient::opt", skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// Guests and storages in the pool.
    #[serde(deserialize_with = "vec_or_null")]
    pub members: Vec<Resource>,
}

#[cfg(test)]
mod tests {
    // Tests may panic on malformed fixtures: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn pools_and_members_read_resource_shapes() {
        let l: Vec<PoolListEntry> =
            serde_json::from_str(r#"[{"poolid":"web","comment":"frontends"},{"poolid":"db"}]"#)
                .unwrap();
        assert_eq!(l[0].poolid, "web");
        assert_eq!(l[1].comment, None);
        let p: Pool = serde_json::from_str(
            r#"{"comment":"frontends","members":[{"id":"qemu/105","type":"qemu","node":"pve1",
                "vmid":"105","name":"web1","status":"running","maxmem":4294967296,"template":0}]}"#,
        )
        .unwrap();
        assert_eq!(p.members[0].vmid, Some(105));
        assert_eq!(p.members[0].template, Some(false));
    }
}
