//! The dashboard in a real browser: `flxp serve` on the simulator (see `serve.rs`), Debian's
//! headless Chromium driven through chromedriver ([`crate::webdriver`]). Every view loads and
//! shows the API's figures; a balance plan is carried out and followed live to its end; a viewer
//! is refused carrying out. The tests fail, never skip, when the browser is missing.
//!
//! `FLXP_UPDATE_SCREENSHOTS=1 cargo test -p flxp --test it dashboard` also writes the screenshots
//! of `docs/screenshots/`.

use std::path::Path;

use flxp_sim::Scenario;
use serde_json::{Value, json};

use crate::serve::{API_TOKEN, Service, start};
use crate::webdriver::Browser;

const VIEWER_TOKEN: &str = "viewer-token-5b1e";

/// One browser at a time: Chromium is heavy, and the other tests of this binary time things.
pub(crate) static ONE_BROWSER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The `[api]` section giving the test's viewer token its role (the operator's comes from
/// `FLXP_API_TOKEN`, which has no role of its own and so is an operator).
pub(crate) fn viewer_config() -> String {
    format!("[api]\ntokens = [{{ value = \"{VIEWER_TOKEN}\", role = \"viewer\" }}]\n")
}

/// What the page prints for a byte count (the script's `bytes()`).
fn gib(n: u64) -> String {
    format!("{:.1} GiB", n as f64 / (1u64 << 30) as f64)
}

pub(crate) async fn shot(b: &Browser, name: &str) {
    // Let the page paint what the last step changed before the picture is taken.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let png = b.screenshot().await;
    assert!(png.starts_with(b"\x89PNG"), "{name}: not a PNG");
    if std::env::var_os("FLXP_UPDATE_SCREENSHOTS").is_some() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
    }
}

/// The guests' placement as the API reports it.
pub(crate) const GUESTS: &str = r#"{ guests(zone: "lab") { vmid node } }"#;

/// Waits until the page shows its login form.
pub(crate) async fn wait_login_form(b: &Browser) {
    b.wait(
        "the login form",
        "return !document.getElementById('login').hidden",
        20,
    )
    .await;
}

/// Submits the form `form` and waits (up to `secs`) until the script `ready` returns something
/// true: its value.
pub(crate) async fn submit(b: &Browser, form: &str, what: &str, ready: &str, secs: u64) -> Value {
    b.click(&format!("{form} button[type=submit]")).await;
    b.wait(what, ready, secs).await
}

/// Logs in on the login form the page shows now.
pub(crate) async fn login(b: &Browser, token: &str) {
    wait_login_form(b).await;
    b.type_into("#token", token).await;
    submit(
        b,
        "#login-form",
        "the zone view",
        "return document.querySelectorAll('#nodes .node').length",
        20,
    )
    .await;
}

pub(crate) async fn open(b: &Browser, s: &Service, hash: &str) {
    b.goto(&format!("{}/{hash}", s.url)).await;
}

/// Opens a view and waits (up to `secs`) until the script `ready` returns something true: its value.
pub(crate) async fn open_view(
    b: &Browser,
    s: &Service,
    hash: &str,
    what: &str,
    ready: &str,
    secs: u64,
) -> Value {
    open(b, s, hash).await;
    b.wait(what, ready, secs).await
}

/// Opens the balance view and waits for its plan.
pub(crate) async fn open_balance(b: &Browser, s: &Service) {
    open_view(
        b,
        s,
        "#/balance",
        "the plan",
        "return document.getElementById('migration-table')",
        30,
    )
    .await;
}

/// Opens the create form and waits for its compute profiles.
pub(crate) async fn open_create(b: &Browser, s: &Service) {
    open_view(
        b,
        s,
        "#/create",
        "the create form",
        "return document.getElementById('cv-compute').options.length",
        20,
    )
    .await;
}

/// Opens the what-if placement form and waits for its host list.
pub(crate) async fn open_place(b: &Browser, s: &Service) {
    open_view(
        b,
        s,
        "#/place",
        "the placement form",
        "return document.getElementById('pl-host').options.length > 1",
        20,
    )
    .await;
}

/// Submits the placement form and waits for the candidates.
pub(crate) async fn submit_place(b: &Browser) {
    submit(
        b,
        "#place-form",
        "the placement",
        "return document.getElementById('candidates')",
        20,
    )
    .await;
}

/// Submits the evacuation form and waits for its plan.
async fn submit_evacuation(b: &Browser) {
    submit(
        b,
        "#evacuate-form",
        "the evacuation plan",
        "return document.getElementById('plan')",
        30,
    )
    .await;
}

/// Clicks what `css` finds and waits for the confirmation dialog.
pub(crate) async fn ask(b: &Browser, css: &str) {
    b.click(css).await;
    b.wait(
        "the confirmation",
        "return document.getElementById('confirm').open",
        10,
    )
    .await;
}

/// Asks to carry out the plan shown and waits for the confirmation dialog.
pub(crate) async fn ask_to_carry_out(b: &Browser) {
    ask(b, "#carry-out").await;
}

/// Clicks what `css` finds, waits for the confirmation dialog and confirms.
pub(crate) async fn click_and_confirm(b: &Browser, css: &str) {
    ask(b, css).await;
    b.click("#confirm-ok").await;
}

/// The value of a script without arguments.
pub(crate) async fn eval(b: &Browser, script: &str) -> Value {
    b.js(script, json!([])).await
}

/// How many elements match `css`.
pub(crate) async fn count(b: &Browser, css: &str) -> Value {
    b.js(
        "return document.querySelectorAll(arguments[0]).length",
        json!([css]),
    )
    .await
}

/// The `vmid` of every item of an API list that `keep` keeps, in order.
pub(crate) fn api_vmids(list: &Value, keep: impl Fn(&Value) -> bool) -> Vec<u64> {
    list.as_array()
        .unwrap()
        .iter()
        .filter(|x| keep(x))
        .map(|x| x["vmid"].as_u64().unwrap())
        .collect()
}

/// The text of the element with `id`; fails when it has none.
pub(crate) async fn text_of(b: &Browser, id: &str) -> String {
    let v = eval(
        b,
        &format!("return document.getElementById('{id}').textContent"),
    )
    .await;
    v.as_str()
        .unwrap_or_else(|| panic!("#{id} has no text: {v}"))
        .to_owned()
}

/// Every `data-vmid` of a table's rows, in order.
pub(crate) async fn vmids(b: &Browser, table: &str) -> Vec<u64> {
    let v = b
        .js(
            "return Array.from(document.querySelectorAll(arguments[0] + ' tbody tr')).map(r => Number(r.dataset.vmid))",
            json!([table]),
        )
        .await;
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect()
}

/// Takes the one browser, starts the service on the demo (with the viewer token) and opens the
/// page in a window of `width`×`height`; the guard holds the browser until the test ends.
pub(crate) async fn setup(
    width: u32,
    height: u32,
) -> (tokio::sync::MutexGuard<'static, ()>, Service, Browser) {
    crate::webdriver::require_browser();
    let one = ONE_BROWSER.lock().await;
    let s = start(Scenario::demo(), &viewer_config(), &[]).await;
    let b = Browser::start(width, height).await;
    open(&b, &s, "").await;
    (one, s, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_view_shows_the_apis_figures_and_a_plan_runs_live() {
    let (_one, s, b) = setup(1280, 900).await;

    // Login: the token goes in a form, never a URL; it is kept in sessionStorage only.
    wait_login_form(&b).await;
    shot(&b, "login").await;
    b.type_into("#token", "not-a-token").await;
    submit(
        &b,
        "#login-form",
        "the refusal",
        "return document.getElementById('login-error').textContent",
        10,
    )
    .await;
    login(&b, API_TOKEN).await;
    let url = eval(&b, "return location.href").await;
    assert!(!url.as_str().unwrap().contains(API_TOKEN), "{url}");
    // The zone view may be drawn before the login's answer stores the token: wait for it.
    let kept = b
        .wait(
            "the token kept in the tab",
            "return sessionStorage.getItem('flxp.token') && \
             [sessionStorage.getItem('flxp.token'), location.href, document.body.innerText]",
            20,
        )
        .await;
    assert_eq!(kept[0], API_TOKEN, "{kept}");
    assert_eq!(
        b.wait(
            "the role badge",
            "return document.getElementById('role').textContent",
            30
        )
        .await,
        "operator"
    );

    // Zone view: every node's figures are the API's.
    let api = s
        .query(r#"{ nodes(zone: "lab") { name mem maxmem committedMem guests } status(zone: "lab") { running guests imbalance threshold violations { rule } } }"#)
        .await;
    let nodes = api["data"]["nodes"].as_array().unwrap();
    let cards = eval(&b, "return Array.from(document.querySelectorAll('#nodes .node')).map(c => ({ name: c.dataset.node, maxmem: Number(c.dataset.maxmem), committed: Number(c.dataset.committed), guests: Number(c.dataset.guests), text: c.innerText }))").await;
    let cards = cards.as_array().unwrap();
    assert_eq!(cards.len(), nodes.len());
    for (n, c) in nodes.iter().zip(cards) {
        assert_eq!(c["name"], n["name"]);
        assert_eq!(c["maxmem"], n["maxmem"]);
        assert_eq!(c["committed"], n["committedMem"]);
        assert_eq!(c["guests"], n["guests"]);
        let text = c["text"].as_str().unwrap();
        assert!(text.contains(&gib(n["maxmem"].as_u64().unwrap())), "{text}");
        assert!(text.contains(&format!("{} guests", n["guests"])), "{text}");
    }
    let st = &api["data"]["status"];
    let total = text_of(&b, "guest-total").await;
    assert_eq!(total, format!("{} / {}", st["running"], st["guests"]));
    let imbalance = text_of(&b, "imbalance").await;
    let want = format!(
        "{:.2} / threshold {:.2}",
        st["imbalance"].as_f64().unwrap(),
        st["threshold"].as_f64().unwrap()
    );
    assert!(imbalance.starts_with(&want), "{imbalance}");
    shot(&b, "zone").await;

    // Dark mode of the same view, and the phone layout.
    b.color_scheme("dark").await;
    let bg = b
        .wait(
            "the dark background",
            "const c = getComputedStyle(document.body).backgroundColor; \
             return c === 'rgb(13, 17, 23)' && c",
            30,
        )
        .await;
    assert_eq!(bg, "rgb(13, 17, 23)", "dark mode background");
    shot(&b, "zone-dark").await;
    b.color_scheme("light").await;

    // A node opens to its guests, with tags and rules.
    let node = nodes[0]["name"].as_str().unwrap();
    b.click(&format!("#nodes .node[data-node='{node}'] h2 a"))
        .await;
    b.wait(
        "the node's guests",
        "return document.getElementById('guest-table')",
        20,
    )
    .await;
    let guests = s.query(GUESTS).await;
    let mut want = api_vmids(&guests["data"]["guests"], |g| g["node"] == node);
    let mut shown = vmids(&b, "#guest-table").await;
    want.sort_unstable();
    shown.sort_unstable();
    assert_eq!(shown, want);
    shot(&b, "node").await;

    // What would balance do now: the same plan as the API's.
    let plan = s
        .query(r#"{ rebalancePlan(zone: "lab") { migrations { vmid to } } }"#)
        .await;
    let planned = api_vmids(&plan["data"]["rebalancePlan"]["migrations"], |_| true);
    assert!(!planned.is_empty(), "the demo zone needs balancing: {plan}");
    open_balance(&b, &s).await;
    assert_eq!(vmids(&b, "#migration-table").await, planned);
    let bars = count(&b, "#before-after [data-node]").await;
    assert_eq!(bars, json!(nodes.len()));
    shot(&b, "balance").await;

    // Carry it out, confirmed, and follow it live to its end.
    ask_to_carry_out(&b).await;
    shot(&b, "balance-confirm").await;
    b.click("#confirm-ok").await;
    b.wait(
        "a migration shown live",
        "return document.querySelectorAll('#run-table tbody tr').length",
        30,
    )
    .await;
    let state = b
        .wait(
            "the end of the run",
            "const s = document.getElementById('run-status'); return s && s.dataset.state !== 'starting' && s.dataset.state !== 'running' && s.dataset.state",
            90,
        )
        .await;
    assert_eq!(state, "finished");
    let done = count(&b, "#run-table tr[data-state=done]").await;
    assert!(done.as_u64().unwrap() >= 1, "{done}");
    let status = text_of(&b, "run-status").await;
    assert!(status.contains(&format!("{done} done")), "{status}");
    eval(
        &b,
        "document.getElementById('run').scrollIntoView({ block: 'center' })",
    )
    .await;
    shot(&b, "balance-done").await;
    let after = s.query(GUESTS).await;
    let moved = eval(&b, "return Array.from(document.querySelectorAll('#run-table tr[data-state=done]')).map(r => [Number(r.dataset.vmid), r.children[1].textContent.split(' → ')[1]])").await;
    for m in moved.as_array().unwrap() {
        let g = after["data"]["guests"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["vmid"] == m[0])
            .unwrap();
        assert_eq!(g["node"], m[1], "{m}");
    }

    // History: flxp's audit log and Proxmox's task list, the same as the API's.
    open_view(
        &b,
        &s,
        "#/history",
        "the audit log and the task history",
        "return document.getElementById('task-table') && document.getElementById('audit-table')",
        20,
    )
    .await;
    let audit = s
        .query(r#"{ auditLog(zone: "lab") { action outcome } }"#)
        .await;
    let audit = audit["data"]["auditLog"].as_array().unwrap();
    assert!(
        audit
            .iter()
            .any(|e| e["action"] == "rebalance" && e["outcome"] == "ok"),
        "{audit:?}"
    );
    assert_eq!(count(&b, "#audit-table tbody tr").await, json!(audit.len()));
    let tasks = s
        .query(r#"{ tasks(zone: "lab", limit: 100) { upid type } }"#)
        .await;
    let tasks = tasks["data"]["tasks"].as_array().unwrap();
    assert!(tasks.iter().any(|t| t["type"] == "qmigrate"), "{tasks:?}");
    let rows = count(&b, "#task-table tbody tr").await;
    assert_eq!(rows, json!(tasks.len()));
    shot(&b, "history").await;

    // What-if placement: the chosen node and every node's verdict are the API's.
    open_place(&b, &s).await;
    b.type_into("#pl-tags", "flxp.anti-affinity.web").await;
    submit_place(&b).await;
    let p = s
        .query(r#"{ placement(zone: "lab", request: { memory: "4GiB", cores: 2, tags: ["flxp.anti-affinity.web"] }, explain: true) { node candidates { node feasible } } }"#)
        .await;
    let chosen = eval(
        &b,
        "return document.getElementById('place-choice').dataset.node",
    )
    .await;
    assert_eq!(chosen, p["data"]["placement"]["node"]);
    let verdicts = eval(&b, "return Array.from(document.querySelectorAll('#candidates tbody tr')).map(r => ({ node: r.dataset.node, feasible: r.dataset.feasible === 'true' }))").await;
    assert_eq!(verdicts, p["data"]["placement"]["candidates"]);
    shot(&b, "place").await;

    // Evacuation plan of a chosen node: the API's.
    let node = open_view(
        &b,
        &s,
        "#/evacuate",
        "the node list",
        "return document.getElementById('evac-node').value",
        20,
    )
    .await;
    submit_evacuation(&b).await;
    let ev = s
        .gql(
            r#"query($n: String!) { evacuationPlan(zone: "lab", node: $n) { migrations { vmid } } }"#,
            json!({ "n": node }),
        )
        .await;
    let count = eval(
        &b,
        "return Number(document.getElementById('plan').dataset.migrations)",
    )
    .await;
    assert_eq!(
        count,
        json!(
            ev["data"]["evacuationPlan"]["migrations"]
                .as_array()
                .unwrap_or_else(|| panic!("{ev}"))
                .len()
        )
    );
    shot(&b, "evacuate").await;

    // createVM with the configured profiles.
    open_create(&b, &s).await;
    let profiles = eval(
        &b,
        "return Array.from(document.getElementById('cv-compute').options).map(o => o.value)",
    )
    .await;
    assert_eq!(profiles, json!(["huge", "medium", "small"]));
    b.type_into("#cv-name", "dash-web").await;
    eval(&b, "document.getElementById('cv-compute').value = 'small'").await;
    b.type_into("#cv-key", crate::serve::KEY).await;
    let vmid = submit(
        &b,
        "#create-form",
        "the new VM",
        "const c = document.getElementById('created'); return c && c.dataset.vmid",
        60,
    )
    .await;
    let g = s.query(r#"{ guests(zone: "lab") { vmid name } }"#).await;
    assert!(
        g["data"]["guests"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["name"] == "dash-web" && Value::String(x["vmid"].to_string()) == vmid),
        "{vmid} {g}"
    );
    shot(&b, "create").await;

    // The vendored GraphiQL renders without reaching any other host.
    open(&b, &s, "graphql").await;
    b.wait(
        "GraphiQL",
        "return document.querySelector('.graphiql-container')",
        30,
    )
    .await;
    shot(&b, "graphiql").await;
    open(&b, &s, "").await;
    let hosts = eval(&b, "return performance.getEntriesByType('resource').map(e => new URL(e.name).host).filter(h => h !== location.host)").await;
    assert_eq!(hosts, json!([]), "resources from another host");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_sees_plans_and_is_refused_carrying_them_out() {
    let (_one, s, b) = setup(390, 844).await;
    login(&b, VIEWER_TOKEN).await;
    // The role badge is filled in once the page has asked the API who it is, which can come
    // after the zone view under load: wait for it rather than read it at once.
    let role = b
        .wait(
            "the role badge",
            "const r = document.getElementById('role').textContent; \
             return r && [r, sessionStorage.getItem('flxp.token'), location.href]",
            30,
        )
        .await;
    assert_eq!(role[0], "viewer", "{role}");
    shot(&b, "zone-phone").await;
    let before = s.query(GUESTS).await;
    let count = s.guest_count();
    open_balance(&b, &s).await;
    ask_to_carry_out(&b).await;
    b.click("#confirm-ok").await;
    let state = b
        .wait(
            "the refusal",
            "const s = document.getElementById('run-status'); return s && s.dataset.state !== 'starting' && s.dataset.state",
            30,
        )
        .await;
    assert_eq!(state, "refused");
    let code = eval(
        &b,
        "return document.querySelector('#run-status [data-code]').dataset.code",
    )
    .await;
    assert_eq!(code, "FORBIDDEN");
    // Refused by the API, not only the page: nothing moved.
    let after = s.query(GUESTS).await;
    assert_eq!(before, after);
    let (status, v) = s
        .gql_as(
            Some(VIEWER_TOKEN),
            r#"mutation { evacuate(zone: "lab", node: "pve1", dryRun: false) { done } }"#,
            json!({}),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(crate::serve::code(&v), "FORBIDDEN", "{v}");
    let (_, v) = s
        .gql_as(
            Some(VIEWER_TOKEN),
            crate::serve::CREATE,
            json!({ "zone": "lab", "name": "nope", "options": crate::serve::options() }),
        )
        .await;
    assert_eq!(crate::serve::code(&v), "FORBIDDEN", "{v}");
    assert_eq!(s.guest_count(), count, "a viewer created a guest");
    // The live stream needs a token like the API.
    assert_eq!(s.get("/events").await.0, 401);
    shot(&b, "viewer-refused").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_evacuation_view_shows_the_guest_still_running_after_the_run() {
    let (_one, s, b) = setup(1280, 900).await;
    login(&b, API_TOKEN).await;
    open_view(
        &b,
        &s,
        "#/evacuate",
        "the node list",
        "return document.getElementById('evac-node').options.length === 4",
        20,
    )
    .await;
    eval(&b, "document.getElementById('evac-node').value = 'pve4'").await;
    submit_evacuation(&b).await;
    // Before: the plan says the demo's ignored 151 would stay.
    let would = text_of(&b, "plan-left-running").await;
    assert!(
        would.contains("151 monitoring: tagged flxp.ignore"),
        "{would}"
    );
    ask_to_carry_out(&b).await;
    let confirm = text_of(&b, "confirm-text").await;
    assert!(
        confirm.ends_with("1 running guests would stay: 151 monitoring."),
        "{confirm}"
    );
    b.click("#confirm-ok").await;
    let left = b
        .wait(
            "what the run left",
            "const l = document.getElementById('left-running'); return l && [l.dataset.state, l.dataset.safe, l.innerText]",
            90,
        )
        .await;
    assert_eq!(left[0], "running", "{left}");
    assert_eq!(left[1], "false", "{left}");
    let text = left[2].as_str().unwrap();
    assert!(
        text.starts_with("1 running guest still here, not safe to reboot"),
        "{text}"
    );
    assert!(
        text.contains("still here: 151 monitoring: tagged flxp.ignore / plb_ignore: never moved"),
        "{text}"
    );
    eval(
        &b,
        "document.getElementById('left-running').scrollIntoView({ block: 'center' })",
    )
    .await;
    shot(&b, "evacuate-left-running").await;

    // The zone view's card of pve4 (now marked in maintenance) says the same.
    open_view(
        &b,
        &s,
        "#/overview",
        "the zone view",
        "return document.querySelector(\"#nodes .node[data-node='pve4'] .maintenance-state\")",
        20,
    )
    .await;
    let card = eval(&b, "return document.querySelector(\"#nodes .node[data-node='pve4'] .maintenance-state\").innerText").await;
    assert!(
        card.as_str()
            .unwrap()
            .starts_with("1 running guest still here, not safe to reboot"),
        "{card}"
    );
    assert_eq!(count(&b, "#nodes .maintenance-state").await, json!(1));
}
