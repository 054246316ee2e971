//! `/cluster/ha/*`: HA resources (list, read, create, update, delete, migrate, relocate), HA rules
//! (with feasibility errors), and the HA status views.

use axum::Router;
use axum::extract::State;
use axum::routing::{get, post};
use flxp_core::snapshot::raw::HaRule;
use flxp_pve::types::HaMigrateResponse;
use flxp_pve::types::migrate::BlockingHaResource;
use serde_json::Value;

use super::p;
use crate::http::{Call, Data, Reply};
use crate::tags::split_list;
use crate::world::{HaRequest, HaResourceConf, ServiceStatus, World};
use crate::{ApiError, Sim};

pub(super) fn routes(r: Router<Sim>) -> Router<Sim> {
    r.route(
        &p("/cluster/ha/resources"),
        get(resources).post(create_resource),
    )
    .route(
        &p("/cluster/ha/resources/{sid}"),
        get(resource).put(update_resource).delete(delete_resource),
    )
    .route(
        &p("/cluster/ha/resources/{sid}/migrate"),
        post(|s: State<Sim>, c: Call| async move { move_resource(s, c, false) }),
    )
    .route(
        &p("/cluster/ha/resources/{sid}/relocate"),
        post(|s: State<Sim>, c: Call| async move { move_resource(s, c, true) }),
    )
    .route(&p("/cluster/ha/rules"), get(rules).post(create_rule))
    .route(
        &p("/cluster/ha/rules/{rule}"),
        get(rule).put(update_rule).delete(delete_rule),
    )
    .route(&p("/cluster/ha/status/current"), get(current))
    .route(&p("/cluster/ha/status/manager_status"), get(manager_status))
}

/// `vm:100`, `ct:101` or a bare `100` → the sid of an existing guest.
fn resolve_sid(w: &World, sid: &str) -> Result<String, ApiError> {
    let id = sid.split_once(':').map(|(_, v)| v).unwrap_or(sid);
    let vmid: u32 = id
        .parse()
        .map_err(|_| ApiError::param("sid", format!("unable to parse service id '{sid}'")))?;
    let g = w
        .guests
        .get(&vmid)
        .ok_or_else(|| ApiError::die(format!("no such VM/CT '{vmid}'")))?;
    let canonical = g.sid();
    if sid.contains(':') && sid != canonical {
        return Err(ApiError::die(format!(
            "no such {} '{vmid}'",
            if sid.starts_with("ct:") { "CT" } else { "VM" }
        )));
    }
    Ok(canonical)
}

async fn resources(State(sim): State<Sim>, call: Call) -> Reply {
    let w = sim.world();
    let kind = call.params.text("type");
    let out: Vec<_> =
        w.ha.resources
            .keys()
            .filter(|sid| {
                kind.as_deref()
                    .is_none_or(|k| sid.starts_with(&format!("{k}:")))
            })
            .filter_map(|sid| w.ha_resource(sid))
            .collect();
    Data::of(&out)
}

async fn resource(State(sim): State<Sim>, call: Call) -> Reply {
    let w = sim.world();
    let sid = resolve_sid(&w, &call.params.req("sid")?)?;
    let r = w
        .ha_resource(&sid)
        .ok_or_else(|| ApiError::die(format!("no such resource '{sid}'")))?;
    Data::of(&r)
}

async fn create_resource(State(sim): State<Sim>, call: Call) -> Reply {
    let mut w = sim.world();
    let sid = resolve_sid(&w, &call.params.req("sid")?)?;
    if w.ha.resources.contains_key(&sid) {
        return Err(ApiError::die(format!(
            "resource ID '{sid}' already defined"
        )));
    }
    let conf = HaResourceConf {
        state: call
            .params
            .text("state")
            .unwrap_or_else(|| "started".into()),
        max_restart: call.params.uint("max_restart").unwrap_or(1),
        max_relocate: call.params.uint("max_relocate").unwrap_or(1),
        failback: call.params.flag("failback").unwrap_or(true),
        group: call.params.text("group"),
        comment: call.params.text("comment"),
    };
    let vmid: u32 = sid
        .split_once(':')
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let guest = w.guests.get(&vmid).cloned();
    if let Some(g) = guest {
        let wants_start = matches!(conf.state.as_str(), "started" | "enabled") && !g.running;
        w.ha.services
            .insert(sid.clone(), ServiceStatus::settled(&g, &conf));
        w.ha.resources.insert(sid.clone(), conf);
        if wants_start {
            w.ha_request(&sid, HaRequest::Start);
        }
    }
    w.ha_schedule_round();
    Ok(Data::null())
}

async fn update_resource(State(sim): State<Sim>, call: Call) -> Reply {
    let mut w = sim.world();
    let sid = resolve_sid(&w, &call.params.req("sid")?)?;
    if let Some(d) = call.params.text("digest") {
        if d != w.ha_resources_digest() {
            return Err(ApiError::die(
                "detected modified configuration - file changed by other user? Try again.",
            ));
        }
    }
    let running = w
        .guests
        .values()
        .find(|g| g.sid() == sid)
        .map(|g| g.running);
    let conf =
        w.ha.resources
            .get_mut(&sid)
            .ok_or_else(|| ApiError::die(format!("service '{sid}' not configured")))?;
    for key in split_list(&call.params.text("delete").unwrap_or_default()) {
        match key {
            "comment" => conf.comment = None,
            "group" => conf.group = None,
            "max_restart" => conf.max_restart = 1,
            "max_relocate" => conf.max_relocate = 1,
            "failback" => conf.failback = true,
            _ => {}
        }
    }
    if let Some(v) = call.params.text("comment") {
        conf.comment = Some(v);
    }
    if let Some(v) = call.params.uint("max_restart") {
        conf.max_restart = v;
    }
    if let Some(v) = call.params.uint("max_relocate") {
        conf.max_relocate = v;
    }
    if let Some(v) = call.params.flag("failback") {
        conf.failback = v;
    }
    let mut request = None;
    if let Some(state) = call.params.text("state") {
        request = match state.as_str() {
            "started" | "enabled" if running == Some(false) => Some(HaRequest::Start),
            "stopped" | "disabled" if running == Some(true) => Some(HaRequest::Stop),
            _ => None,
        };
        conf.state = state;
    }
    if let Some(r) = request {
        w.ha_request(&sid, r);
    }
    w.ha_schedule_round();
    Ok(Data::null())
}

async fn delete_resource(State(sim): State<Sim>, call: Call) -> Reply {
    let mut w = sim.world();
    let sid = resolve_sid(&w, &call.params.req("sid")?)?;
    if w.ha.resources.remove(&sid).is_none() {
        return Err(ApiError::die(format!(
            "cannot delete service '{sid}', not HA managed!"
        )));
    }
    w.ha.services.remove(&sid);
    Ok(Data::null())
}

/// `POST /cluster/ha/resources/{sid}/migrate|relocate`: queue a move; answers what HA will do.
fn move_resource(State(sim): State<Sim>, call: Call, relocate: bool) -> Reply {
    let mut w = sim.world();
    let sid = resolve_sid(&w, &call.params.req("sid")?)?;
    if !w.is_ha_managed(&sid) {
        return Err(ApiError::die(format!("service '{sid}' not configured")));
    }
    let node = call.params.req("node")?;
    w.node(&node)?;
    let blocking: Vec<BlockingHaResource> = w
        .ha_blockers(&sid, &node)
        .into_iter()
        .map(|(sid, cause)| BlockingHaResource {
            sid: Some(sid),
            cause: Some(cause.into()),
        })
        .collect();
    let comigrated = w.ha_positive_partners(&sid);
    if blocking.is_empty() {
        let request = if relocate {
            HaRequest::Relocate(node.clone())
        } else {
            HaRequest::Migrate(node.clone())
        };
        w.ha_request(&sid, request);
        if let Some(vmid) = sid.split_once(':').and_then(|(_, id)| id.parse().ok()) {
            w.records_mut().ha_requested(vmid, &call.user());
        }
    }
    Data::of(&HaMigrateResponse {
        sid: Some(sid),
        requested_node: Some(node),
        comigrated_resources: comigrated,
        blocking_resources: blocking,
    })
}

async fn rules(State(sim): State<Sim>, call: Call) -> Reply {
    let w = sim.world();
    let kind = call.params.text("type");
    let resource = call.params.text("resource");
    Ok(Data::value(Value::Array(
        w.ha_rules_view(kind.as_deref(), resource.as_deref()),
    )))
}

async fn rule(State(sim): State<Sim>, call: Call) -> Reply {
    let w = sim.world();
    let id = call.params.req("rule")?;
    w.ha_rules_view(None, None)
        .into_iter()
        .find(|r| r.get("rule").and_then(Value::as_str) == Some(id.as_str()))
        .map(Data::value)
        .ok_or_else(|| ApiError::die(format!("no such ha rule '{id}'")))
}

/// Checks the resources and nodes a rule names, as the API does before saving it.
fn check_rule_refs(w: &World, rule: &HaRule) -> Result<(), ApiError> {
    let (unmanaged, missing) = w.rule_bad_refs(rule);
    if !unmanaged.is_empty() {
        return Err(ApiError::die(format!(
            "cannot use unmanaged resource(s) {}.",
            unmanaged.join(", ")
        )));
    }
    if !missing.is_empty() {
        return Err(ApiError::die(format!(
            "cannot use non-existant node(s) {}.",
            missing.join(", ")
        )));
    }
    Ok(())
}

/// Refuses to save a rule the feasibility check rejects (`400 Rule '<id>' is invalid.`).
fn assert_feasible(w: &World, id: &str) -> Result<(), ApiError> {
    if let Some(errors) = w.ha_rule_errors().remove(id) {
        let errors = errors.into_iter().map(|(k, v)| (k, v.join(", "))).collect();
        let mut e = ApiError::new(400, format!("Rule '{id}' is invalid."));
        e.errors = Some(errors);
        return Err(e);
    }
    Ok(())
}

fn fill_rule(rule: &mut HaRule, call: &Call) {
    if let Some(v) = call.params.text("resources") {
        rule.resources = Some(split_list(&v).join(","));
    }
    if let Some(v) = call.params.text("nodes") {
        rule.nodes = Some(split_list(&v).join(","));
    }
    if let Some(v) = call.params.flag("strict") {
        rule.strict = Some(v);
    }
    if let Some(v) = call.params.text("affinity") {
        rule.affinity = Some(v);
    }
    if let Some(v) = call.params.text("comment") {
        rule.comment = Some(v);
    }
    if let Some(v) = call.params.flag("disable") {
        rule.disable = v.then_some(true);
    }
}

async fn create_rule(State(sim): State<Sim>, call: Call) -> Reply {
    let mut w = sim.world();
    let id = call.params.req("rule")?;
    if w.ha
        .rules
        .iter()
        .any(|r| r.rule.as_deref() == Some(id.as_str()))
    {
        return Err(ApiError::die(format!("HA rule '{id}' already defined")));
    }
    let mut rule = HaRule {
        rule: Some(id.clone()),
        kind: call.params.text("type"),
        order: Some(w.ha.rules.iter().filter_map(|r| r.order).max().unwrap_or(0) + 1),
        ..HaRule::default()
    };
    fill_rule(&mut rule, &call);
    check_rule_refs(&w, &rule)?;
    w.ha.rules.push(rule);
    if let Err(e) = assert_feasible(&w, &id) {
        w.ha.rules
            .retain(|r| r.rule.as_deref() != Some(id.as_str()));
        return Err(e);
    }
    w.ha_schedule_round();
    Ok(Data::null())
}

async fn update_rule(State(sim): State<Sim>, call: Call) -> Reply {
    let mut w = sim.world();
    let id = call.params.req("rule")?;
    if let Some(d) = call.params.text("digest") {
        if d != w.ha_rules_digest() {
            return Err(ApiError::die(
                "detected modified configuration - file changed by other user? Try again.",
            ));
        }
    }
    let index =
        w.ha.rules
            .iter()
            .position(|r| r.rule.as_deref() == Some(id.as_str()))
            .ok_or_else(|| ApiError::die(format!("HA rule '{id}' does not exist")))?;
    let before = w.ha.rules[index].clone();
    let mut rule = before.clone();
    for key in split_list(&call.params.text("delete").unwrap_or_default()) {
        match key {
            "comment" => rule.comment = None,
            "disable" => rule.disable = None,
            "strict" => rule.strict = None,
            _ => {}
        }
    }
    fill_rule(&mut rule, &call);
    check_rule_refs(&w, &rule)?;
    w.ha.rules[index] = rule;
    if let Err(e) = assert_feasible(&w, &id) {
        w.ha.rules[index] = before;
        return Err(e);
    }
    w.ha_schedule_round();
    Ok(Data::null())
}

async fn delete_rule(State(sim): State<Sim>, call: Call) -> Reply {
    let mut w = sim.world();
    let id = call.params.req("rule")?;
    w.ha.rules
        .retain(|r| r.rule.as_deref() != Some(id.as_str()));
    // Removing a rule can make a conflicting one feasible again.
    w.ha_schedule_round();
    Ok(Data::null())
}

async fn current(State(sim): State<Sim>) -> Reply {
    Ok(Data::value(Value::Array(sim.world().ha_status_current())))
}

async fn manager_status(State(sim): State<Sim>) -> Reply {
    Data::of(&sim.world().ha_manager_status())
}
