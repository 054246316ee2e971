//! The API's side of the audit log ([`crate::audit`]): a schema extension that records every
//! mutation that acts (dry runs plan only and are not recorded; refusals are), and the
//! `auditLog` query the dashboard's History view reads.
//!
//! The extension sees each top-level mutation field: its arguments (variables filled in, secrets
//! redacted), the caller the HTTP layer found, and the outcome. A resolver that carried a plan
//! out adds the plan and the result through `note`, so the record says what was done, not
//! only what was asked.

use std::sync::{Arc, Mutex};

use async_graphql::extensions::{
    Extension, ExtensionContext, ExtensionFactory, NextPrepareRequest, NextResolve, ResolveInfo,
};
use async_graphql::{Context, Json, Object, Request, Result, ServerResult, SimpleObject, Value};
use serde_json::json;

use super::ctx::state;
use super::types::{RunResult, Vm};
use crate::audit::{Entry, bounded, redact};
use crate::serve::state::{AppState, Caller, blocking};

/// The schema extension recording mutations.
#[derive(Debug, Default)]
pub struct Audit;

impl ExtensionFactory for Audit {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(Audit)
    }
}

/// What one request's mutations leave for their record: the variables (to read arguments
/// given as `$x`), and the plan and result the last resolver noted.
#[derive(Debug, Default)]
struct Pending {
    variables: async_graphql::Variables,
    noted: Mutex<Option<(serde_json::Value, serde_json::Value)>>,
}

/// Records the plan carried out and what it did, for the audit record of the running mutation.
pub(super) fn note_values(ctx: &Context<'_>, plan: serde_json::Value, result: serde_json::Value) {
    if let Some(p) = ctx.data_opt::<Arc<Pending>>() {
        *p.noted.lock().unwrap_or_else(|e| e.into_inner()) = Some((plan, result));
    }
}

/// Records a `rebalance`/`evacuate` run: its migrations and what happened to them.
pub(super) fn note(ctx: &Context<'_>, r: &RunResult) {
    let p = &r.plan.plan;
    let plan = json!({
        "summary": p.summary,
        "imbalanceBefore": p.imbalance_before,
        "imbalanceAfter": p.imbalance_after,
        "migrations": p.migrations.iter().map(|m| json!({
            "vmid": m.vmid, "name": m.name, "from": m.from, "to": m.to,
        })).collect::<Vec<_>>(),
    });
    let result = json!({
        "executed": r.executed,
        "done": r.done,
        "failed": r.failed,
        "leftRunning": r.left_running.iter().map(|g| g.vmid).collect::<Vec<_>>(),
    });
    note_values(ctx, plan, result);
}

/// Records a `createVM`: the VM and where it went.
pub(super) fn note_vm(ctx: &Context<'_>, vm: &Vm) {
    note_values(
        ctx,
        serde_json::Value::Null,
        json!({ "vmid": vm.id.as_str(), "name": vm.name, "node": vm.host.name }),
    );
}

#[async_trait::async_trait]
impl Extension for Audit {
    async fn prepare_request(
        &self,
        ctx: &ExtensionContext<'_>,
        request: Request,
        next: NextPrepareRequest<'_>,
    ) -> ServerResult<Request> {
        let pending = Arc::new(Pending {
            variables: request.variables.clone(),
            noted: Mutex::new(None),
        });
        next.run(ctx, request.data(pending)).await
    }

    async fn resolve(
        &self,
        ctx: &ExtensionContext<'_>,
        info: ResolveInfo<'_>,
        next: NextResolve<'_>,
    ) -> ServerResult<Option<Value>> {
        if info.parent_type != "Mutation" || info.path_node.parent.is_some() {
            return next.run(ctx, info).await;
        }
        let time = flxp_engine::epoch_now();
        let pending = ctx.data_opt::<Arc<Pending>>().cloned();
        let args = arguments(&info, pending.as_deref());
        let action = info.name.to_owned();
        let answer = next.run(ctx, info).await;
        // Dry runs only plan: not an action. A refused one is recorded all the same.
        let dry = args.get("dryRun").and_then(serde_json::Value::as_bool) == Some(true);
        let (Some(s), false) = (ctx.data_opt::<AppState>(), dry) else {
            return answer;
        };
        let Some(log) = s.audit.clone() else {
            return answer;
        };
        let caller = ctx.data_opt::<Caller>().cloned();
        let noted = pending.and_then(|p| p.noted.lock().unwrap_or_else(|e| e.into_inner()).take());
        let (outcome, error) = match &answer {
            Ok(_) => ("ok", None),
            Err(e) => {
                let code = e
                    .extensions
                    .as_ref()
                    .and_then(|x| x.get("code"))
                    .map(ToString::to_string);
                let refused = code.as_deref() == Some("\"FORBIDDEN\"");
                (
                    if refused { "refused" } else { "error" },
                    Some(e.message.clone()),
                )
            }
        };
        let (plan, result) = match noted {
            Some((plan, result)) => ((!plan.is_null()).then_some(plan), Some(result)),
            None => (None, None),
        };
        let entry = Entry {
            time,
            token: caller
                .as_ref()
                .map_or_else(|| "(in-process)".to_owned(), |c| c.name.clone()),
            role: caller
                .as_ref()
                .map_or(crate::config::Role::Viewer, |c| c.role)
                .as_str()
                .to_owned(),
            zone: args.get("zone").and_then(|z| z.as_str()).map(str::to_owned),
            action,
            args,
            outcome: outcome.to_owned(),
            error,
            plan,
            result,
        };
        let written = blocking("writing the audit log", move || log.append(&entry)).await;
        match written {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::error!(error = %e, "cannot write the audit log"),
            Err(e) => tracing::error!(error = %e.message, "cannot write the audit log"),
        }
        answer
    }
}

/// The field's arguments as JSON, variables filled in, secrets redacted and long values cut.
fn arguments(info: &ResolveInfo<'_>, pending: Option<&Pending>) -> serde_json::Value {
    let mut map = serde_json::Map::new();
    for (name, value) in &info.field.arguments {
        let value = value.node.clone().into_const_with(|var| {
            Ok::<_, std::convert::Infallible>(
                pending
                    .and_then(|p| p.variables.get(&var).cloned())
                    .unwrap_or(Value::Null),
            )
        });
        let json = value
            .ok()
            .and_then(|v| v.into_json().ok())
            .unwrap_or(serde_json::Value::Null);
        map.insert(name.node.to_string(), json);
    }
    bounded(redact(serde_json::Value::Object(map)))
}

/// One record of the audit log.
#[derive(SimpleObject, Debug, Clone)]
pub struct AuditEntry {
    /// When it was asked, Unix seconds.
    pub time: i64,
    /// The name of the token that asked.
    pub token: String,
    /// The token's role.
    pub role: String,
    /// The mutation.
    pub action: String,
    /// The zone it was about.
    pub zone: Option<String>,
    /// Its arguments, secrets redacted.
    pub args: Json<serde_json::Value>,
    /// `ok`, `error` or `refused`.
    pub outcome: String,
    /// Why it failed or was refused.
    pub error: Option<String>,
    /// The plan carried out.
    pub plan: Option<Json<serde_json::Value>>,
    /// What carrying it out did.
    pub result: Option<Json<serde_json::Value>>,
}

impl From<Entry> for AuditEntry {
    fn from(e: Entry) -> Self {
        Self {
            time: e.time,
            token: e.token,
            role: e.role,
            action: e.action,
            zone: e.zone,
            args: Json(e.args),
            outcome: e.outcome,
            error: e.error,
            plan: e.plan.map(Json),
            result: e.result.map(Json),
        }
    }
}

/// The audit log query (merged into the query root).
#[derive(Debug, Default)]
pub struct AuditQuery;

#[Object]
impl AuditQuery {
    /// Actions asked of the API, newest first: who (token name and role), what, when, the plan
    /// and the result. Any token may read it (it holds no secret). `since` is Unix seconds;
    /// `zone` keeps the actions about that zone. Empty when `[audit] enabled = false`.
    async fn audit_log(
        &self,
        ctx: &Context<'_>,
        since: Option<i64>,
        zone: Option<String>,
        #[graphql(default = 100)] limit: i32,
    ) -> Result<Vec<AuditEntry>> {
        let s = state(ctx)?;
        let Some(log) = s.audit.clone() else {
            return Ok(Vec::new());
        };
        let limit = usize::try_from(limit.clamp(0, 10_000)).unwrap_or(0);
        // Filtering by zone reads more than `limit` lines: read all that `since` allows.
        let read = if zone.is_some() { usize::MAX } else { limit };
        let entries = blocking("reading the audit log", move || log.read(since, read))
            .await?
            .map_err(super::ApiError::internal)?;
        Ok(entries
            .into_iter()
            .filter(|e| zone.is_none() || e.zone == zone)
            .take(limit)
            .map(AuditEntry::from)
            .collect())
    }
}
