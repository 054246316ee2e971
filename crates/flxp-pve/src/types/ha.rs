//! HA beyond Contract 1's lists: `manager_status` (node maintenance lives there) and HA migrate.
//!
//! The rules, resources and `status/current` lists are `flxp_core`'s
//! [`HaRule`](super::HaRule), [`HaResource`](super::HaResource) and
//! [`HaStatusEntry`](super::HaStatusEntry).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use flxp_core::lenient;

use super::migrate::BlockingHaResource;
use super::quirks::{map_or_empty, string_list, string_required, vec_or_null};

/// `GET /cluster/ha/status/manager_status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ManagerStatusResponse {
    /// The CRM's view: node states, service states, maintenance requests.
    pub manager_status: ManagerStatus,
    /// Quorum as seen by the answering node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quorum: Option<HaQuorum>,
    /// Each node's LRM state, by node name.
    #[serde(deserialize_with = "map_or_empty")]
    pub lrm_status: BTreeMap<String, LrmStatus>,
}

/// The `manager_status` block.
#[serde_with::apply(Option => #[serde(with = "lenient::opt")])]
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ManagerStatus {
    /// The node running the CRM master.
    pub master_node: Option<String>,
    /// When the CRM last wrote its state (epoch seconds).
    pub timestamp: Option<i64>,
    /// HA node state: `online`, `maintenance`, `unknown`, `fence`, `gone`.
    #[serde(deserialize_with = "map_or_empty")]
    pub node_status: BTreeMap<String, String>,
    /// Pending node requests, e.g. `{maintenance: 1}`.
    #[serde(
        deserialize_with = "map_or_empty",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub node_request: BTreeMap<String, NodeRequest>,
    /// Each HA service's state, by sid.
    #[serde(deserialize_with = "map_or_empty")]
    pub service_status: BTreeMap<String, ServiceStatus>,
}

/// A pending request on one node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeRequest {
    /// Maintenance mode requested.
    #[serde(with = "lenient::opt", skip_serializing_if = "Option::is_none")]
    pub maintenance: Option<bool>,
}

/// The CRM's view of one HA service.
#[serde_with::apply(Option => #[serde(with = "lenient::opt")])]
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServiceStatus {
    /// Node it is on (or being moved from).
    pub node: Option<String>,
    /// Service state (`started`, `migrate`, `relocate`, ...).
    pub state: Option<String>,
    /// Target of a running migration.
    pub target: Option<String>,
    /// Change id.
    pub uid: Option<String>,
    /// Node it was moved away from for maintenance (it returns there afterwards).
    pub maintenance_node: Option<String>,
}

/// Quorum block of `manager_status`.
#[serde_with::apply(Option => #[serde(with = "lenient::opt")])]
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct HaQuorum {
    /// Answering node.
    pub node: Option<String>,
    /// Whether the cluster is quorate.
    pub quorate: Option<bool>,
}

/// One node's LRM state.
#[serde_with::apply(Option => #[serde(with = "lenient::opt")])]
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LrmStatus {
    /// `active`, `maintenance`, `restart`, `shutdown`, `disarm`.
    pub mode: Option<String>,
    /// `wait_for_agent_lock`, `active`, `lost_agent_lock`, ...
    pub state: Option<String>,
    /// When the LRM last wrote its state.
    pub timestamp: Option<i64>,
    /// Results of recent commands, as sent.
    #[serde_with(skip_apply)]
    pub results: Option<serde_json::Value>,
}

/// Body of `POST /cluster/ha/resources/{sid}/migrate` (and `/relocate`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HaMigrateParams {
    /// Target node.
    #[serde(deserialize_with = "string_required")]
    pub node: String,
}

/// Answer of an HA migrate: the request is queued, not done (no UPID).
#[serde_with::apply(
    Option => #[serde(with = "lenient::opt")],
    Vec => #[serde(skip_serializing_if = "Vec::is_empty")],
)]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct HaMigrateResponse {
    /// The HA resource that was asked to move.
    pub sid: Option<String>,
    /// Where it was asked to go.
    #[serde(rename = "requested-node")]
    pub requested_node: Option<String>,
    /// Resources moved along by positive resource-affinity rules.
    #[serde(rename = "comigrated-resources", deserialize_with = "string_list")]
    pub comigrated_resources: Vec<String>,
    /// Resources whose negative affinity blocks the move.
    #[serde(rename = "blocking-resources", deserialize_with = "vec_or_null")]
    pub blocking_resources: Vec<BlockingHaResource>,
}

#[cfg(test)]
mod tests {
    // Tests may panic on malformed fixtures: that is the failure report.
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::types::form::to_form;
    use crate::types::{HaResource, HaRule, HaStatusEntry};

    #[test]
    fn manager_status_shows_maintenance() {
        let m: ManagerStatusResponse = serde_json::from_str(
            r#"{"manager_status":{"master_node":"pve1","timestamp":"1764400000",
                  "node_status":{"pve1":"online","pve2":"maintenance"},
                  "node_request":{"pve2":{"maintenance":1}},
                  "service_status":{"vm:100":{"node":"pve1","state":"started","uid":"abc",
                                              "maintenance_node":"pve2"}}},
                "quorum":{"node":"pve1","quorate":"1"},
                "lrm_status":{"pve2":{"mode":"maintenance","state":"active","timestamp":1764399990,
                                      "results":{}}}}"#,
        )
        .unwrap();
        let ms = &m.manager_status;
        assert_eq!(ms.timestamp, Some(1_764_400_000));
        assert_eq!(ms.node_status["pve2"], "maintenance");
        assert_eq!(ms.node_request["pve2"].maintenance, Some(true));
        assert_eq!(
            ms.service_status["vm:100"].maintenance_node.as_deref(),
            Some("pve2")
        );
        assert_eq!(m.lrm_status["pve2"].mode.as_deref(), Some("maintenance"));
        assert_eq!(m.quorum.unwrap().quorate, Some(true));
    }

    #[test]
    fn manager_status_of_a_cluster_without_ha_is_empty() {
        let m: ManagerStatusResponse =
            serde_json::from_str(r#"{"manager_status":{},"lrm_status":[]}"#).unwrap();
        assert!(m.manager_status.node_status.is_empty() && m.lrm_status.is_empty());
    }

    #[test]
    fn ha_migrate_params_and_response() {
        let p = HaMigrateParams {
            node: "pve3".into(),
        };
        assert_eq!(to_form(&p).unwrap(), "node=pve3");
        let r: HaMigrateResponse = serde_json::from_str(
            r#"{"sid":"vm:100","requested-node":"pve3","comigrated-resources":["vm:101"],
                "blocking-resources":[{"sid":"vm:102","cause":"resource-affinity"}]}"#,
        )
        .unwrap();
        assert_eq!(r.requested_node.as_deref(), Some("pve3"));
        assert_eq!(r.comigrated_resources, ["vm:101"]);
        assert_eq!(r.blocking_resources[0].sid.as_deref(), Some("vm:102"));
    }

    #[test]
    fn contract_one_ha_lists_read_the_reference_shapes() {
        let rules: Vec<HaRule> = serde_json::from_str(
            r#"[{"rule":"keep-apart","type":"resource-affinity","resources":"vm:100,vm:101",
                 "affinity":"negative","digest":"ab","order":"1"},
                {"rule":"db-on-pve1","type":"node-affinity","resources":"vm:102",
                 "nodes":"pve1:2,pve2","strict":1,"disable":0,"order":2}]"#,
        )
        .unwrap();
        assert_eq!(rules[0].order, Some(1));
        assert_eq!(rules[1].strict, Some(true));
        let resources: Vec<HaResource> = serde_json::from_str(
            r#"[{"sid":"vm:100","type":"vm","state":"started","failback":"1","max_restart":1,
                 "max_relocate":"1","digest":"cd"}]"#,
        )
        .unwrap();
        assert_eq!(resources[0].failback, Some(true));
        let status: Vec<HaStatusEntry> = serde_json::from_str(
            r#"[{"id":"quorum","type":"quorum","node":"pve1","status":"OK","quorate":1},
                {"id":"lrm:pve2","type":"lrm","node":"pve2","status":"pve2 (maintenance mode)",
                 "timestamp":"1764399990"},
                {"id":"service:vm:100","type":"service","sid":"vm:100","node":"pve1",
                 "state":"started","crm_state":"started","request_state":"started"}]"#,
        )
        .unwrap();
        assert_eq!(status[0].quorate, Some(true));
        assert_eq!(status[1].timestamp, Some(1_764_399_990));
        assert_eq!(status[2].crm_state.as_deref(), Some("started"));
    }
}
