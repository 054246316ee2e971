//! `/access/ticket` (password login, ticket renewal) and `/access/permissions`.

use std::collections::BTreeMap;

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use flxp_pve::types::{Permissions, TicketRequest, TicketResponse};

use super::p;
use crate::http::{Call, Data, Reply};
use crate::{ApiError, Sim};

pub(super) fn routes(r: Router<Sim>) -> Router<Sim> {
    r.route(&p("/access/ticket"), get(ticket_dummy).post(ticket))
        .route(&p("/access/permissions"), get(permissions))
}

/// `GET /access/ticket` is a dummy that returns null.
async fn ticket_dummy() -> Reply {
    Ok(Data::null())
}

/// `POST /access/ticket`: a password (or a still valid ticket) for a ticket and CSRF token.
async fn ticket(State(sim): State<Sim>, call: Call) -> Reply {
    let req: TicketRequest = call.typed()?;
    match sim
        .auth()
        .login(&req.username, req.realm.as_deref(), req.password.expose())
    {
        Some((principal, ticket, csrf)) => {
            let cluster = sim.world().settings.cluster_name.clone();
            Data::of(&TicketResponse {
                username: Some(principal.userid.clone()),
                ticket: Some(ticket.into()),
                csrf_prevention_token: Some(csrf.into()),
                clustername: Some(cluster),
                cap: Some(
                    serde_json::to_value(capabilities(principal.readonly)).unwrap_or_default(),
                ),
                need_tfa: None,
            })
        }
        None => {
            tracing::debug!(user = %req.username, "login failed");
            tokio::time::sleep(sim.auth_delay()).await;
            Err(ApiError::new(401, "authentication failure"))
        }
    }
}

/// Privileges per ACL path: everything for read-write principals, `*.Audit` for read-only ones.
fn privileges(readonly: bool) -> Permissions {
    let all = [
        "Datastore.Allocate",
        "Datastore.AllocateSpace",
        "Datastore.Audit",
        "Pool.Allocate",
        "Pool.Audit",
        "SDN.Audit",
        "SDN.Use",
        "Sys.Audit",
        "Sys.Console",
        "Sys.Modify",
        "Sys.PowerMgmt",
        "VM.Allocate",
        "VM.Audit",
        "VM.Clone",
        "VM.Config.CDROM",
        "VM.Config.CPU",
        "VM.Config.Cloudinit",
        "VM.Config.Disk",
        "VM.Config.HWType",
        "VM.Config.Memory",
        "VM.Config.Network",
        "VM.Config.Options",
        "VM.Migrate",
        "VM.PowerMgmt",
    ];
    let privs: BTreeMap<String, u8> = all
        .iter()
        .filter(|p| !readonly || p.ends_with(".Audit"))
        .map(|p| (p.to_string(), 1))
        .collect();
    Permissions(
        [
            "/", "/access", "/nodes", "/pool", "/sdn", "/storage", "/vms",
        ]
        .iter()
        .map(|path| (path.to_string(), privs.clone()))
        .collect(),
    )
}

/// The `cap` of a ticket response: privileges grouped as the GUI expects them.
fn capabilities(readonly: bool) -> BTreeMap<String, BTreeMap<String, u8>> {
    let perms = privileges(readonly).0.remove("/").unwrap_or_default();
    let group = |prefix: &str| -> BTreeMap<String, u8> {
        perms
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    };
    BTreeMap::from([
        ("vms".into(), group("VM.")),
        ("storage".into(), group("Datastore.")),
        ("nodes".into(), group("Sys.")),
        ("dc".into(), group("SDN.")),
        ("access".into(), BTreeMap::new()),
    ])
}

/// `GET /access/permissions`: the caller's effective privileges (optionally for one path).
async fn permissions(call: Call) -> Reply {
    let mut perms = match &call.principal.privs {
        // A token limited by its scenario holds its privileges on `/`, propagated everywhere.
        Some(privs) => {
            let held: BTreeMap<String, u8> = privs.iter().map(|p| (p.clone(), 1)).collect();
            Permissions(BTreeMap::from([("/".to_owned(), held)]))
        }
        None => privileges(call.principal.readonly),
    };
    if let Some(path) = call.params.text("path") {
        let privs = perms.0.get("/").cloned().unwrap_or_default();
        perms = Permissions(BTreeMap::from([(path, privs)]));
    }
    Data::of(&perms)
}
