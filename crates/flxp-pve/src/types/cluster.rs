//! `/cluster/*` outside HA and tasks: resources (the query), status, options, nextid.
//!
//! `/cluster/resources` entries are `flxp_core`'s [`Resource`](super::Resource): Contract 1 holds
//! them exactly as this endpoint returns them.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use flxp_core::lenient;

use super::quirks::u32_required;

/// The `type` filter of `GET /cluster/resources` (`vm` returns qemu and lxc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ResourceType {
    /// qemu and lxc guests.
    Vm,
    /// Storages, one entry per node.
    Storage,
    /// Nodes.
    Node,
    /// SDN objects.
    Sdn,
}

/// Query of `GET /cluster/resources`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ResourcesQuery {
    /// Only entries of this type.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<ResourceType>,
}

/// One entry of `GET /cluster/status`: the cluster itself or one node.
#[serde_with::apply(Option => #[serde(with = "lenient::opt")])]
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClusterStatusEntry {
    /// `cluster` or `node/<name>`.
    #[serialize_always]
    pub id: Option<String>,
    /// Cluster or node name.
    #[serialize_always]
    pub name: Option<String>,
    /// `cluster` or `node`.
    #[serde(rename = "type")]
    #[serialize_always]
    pub kind: Option<String>,
    /// \[node\] IP of the resolved node name.
    pub ip: Option<String>,
    /// \[node\] Subscription level.
    pub level: Option<String>,
    /// \[node\] Whether this is the answering node.
    pub local: Option<bool>,
    /// \[node\] Corosync node id.
    pub nodeid: Option<u64>,
    /// \[node\] Whether the node is online.
    pub online: Option<bool>,
    /// \[cluster\] Node count, offline nodes included.
    pub nodes: Option<u64>,
    /// \[cluster\] Whether the cluster has quorum.
    pub quorate: Option<bool>,
    /// \[cluster\] Version of the corosync configuration.
    pub version: Option<u64>,
}

impl ClusterStatusEntry {
    /// The node's name when this entry is a node (the other entry is the cluster itself).
    pub fn node_name(&self) -> Option<&str> {
        match self.kind.as_deref() {
            Some("node") => self.name.as_deref(),
            _ => None,
        }
    }
}

/// `GET /cluster/options`: the datacenter configuration (`crs`, `tag-style`, `next-id`, ...), kept
/// as Proxmox sends it because Contract 1 stores it verbatim.
pub type ClusterOptions = serde_json::Map<String, serde_json::Value>;

/// Query of `GET /cluster/nextid`: check one id instead of asking for the lowest free one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NextIdQuery {
    /// The VMID to check (answered with itself if free, else 400 `VM <id> already exists`).
    #[serde(with = "lenient::opt", skip_serializing_if = "Option::is_none")]
    pub vmid: Option<u32>,
}

/// The answer of `GET /cluster/nextid`: read from a number or a string, written as a string as
/// Proxmox does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NextId(pub u32);

impl Serialize for NextId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for NextId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        u32_required(d).map(NextId)
    }
}

impl fmt::Display for NextId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    // Tests may panic on malformed fixtures: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::types::form::to_form;

    #[test]
    fn nextid_reads_string_or_number_and_writes_a_string() {
        assert_eq!(
            serde_json::from_str::<NextId>(r#""105""#).unwrap(),
            NextId(105)
        );
        assert_eq!(serde_json::from_str::<NextId>("105").unwrap(), NextId(105));
        assert_eq!(serde_json::to_string(&NextId(105)).unwrap(), r#""105""#);
        assert!(serde_json::from_str::<NextId>(r#""abc""#).is_err());
        assert!(serde_json::from_str::<NextId>("null").is_err());
    }

    #[test]
    fn queries_are_form_encoded() {
        let q = ResourcesQuery {
            kind: Some(ResourceType::Vm),
        };
        assert_eq!(to_form(&q).unwrap(), "type=vm");
        assert_eq!(to_form(&ResourcesQuery::default()).unwrap(), "");
        assert_eq!(
            to_form(&NextIdQuery { vmid: Some(2004) }).unwrap(),
            "vmid=2004"
        );
    }

    #[test]
    fn cluster_status_reads_perl_booleans() {
        let entries: Vec<ClusterStatusEntry> = serde_json::from_str(
            r#"[{"id":"cluster","name":"lab","type":"cluster","nodes":3,"quorate":1,"version":7},
                {"id":"node/pve1","name":"pve1","type":"node","ip":"10.0.0.1","level":"",
                 "local":"1","nodeid":"1","online":1}]"#,
        )
        .unwrap();
        assert_eq!(entries[0].quorate, Some(true));
        assert_eq!(entries[1].local, Some(true));
        assert_eq!(entries[1].nodeid, Some(1));
        let back = serde_json::to_string(&entries[1]).unwrap();
        assert_eq!(
            back,
            r#"{"id":"node/pve1","name":"pve1","type":"node","ip":"10.0.0.1","level":"","local":1,"nodeid":1,"online":1}"#
        );
    }
}
