//! The dashboard as a live console, in a real browser (see `dashboard.rs`): pages follow the
//! cluster without a reload, actions are safe against double clicks and stale plans, a node's
//! page acts on the node, and the display faults found on the page stay fixed.

use std::time::Duration;

use flxp_sim::Scenario;
use serde_json::{Value, json};

use crate::dashboard::{
    GUESTS, ask_to_carry_out, count, eval, login, open_balance, open_create, open_place, open_view,
    setup, submit_place, text_of,
};
use crate::serve::{API_TOKEN, KEY};
use crate::webdriver::Browser;

/// Whether the page was loaded once only: a mark set on `window` survives only without reloads.
async fn mark_page(b: &Browser) {
    eval(b, "window.__sameLoad = true").await;
}

async fn assert_same_page(b: &Browser) {
    assert_eq!(
        eval(b, "return window.__sameLoad === true").await,
        json!(true),
        "the page reloaded"
    );
}

/// Whether the page scrolls sideways (its content is wider than the window).
async fn overflows(b: &Browser) -> Value {
    eval(
        b,
        "return document.documentElement.scrollWidth > window.innerWidth \
         && [document.documentElement.scrollWidth, window.innerWidth]",
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_zone_view_and_task_pane_follow_the_cluster_without_a_reload() {
    let (_one, s, b) = setup(1280, 900).await;
    login(&b, API_TOKEN).await;
    mark_page(&b).await;
    // Spreads are percentage points, as `flxp status` prints them.
    let spread = b
        .wait(
            "the memory spread",
            "const s = document.getElementById('memory-spread'); return s && s.textContent",
            20,
        )
        .await;
    assert!(spread.as_str().unwrap().ends_with(" pp"), "{spread}");
    let soft = b
        .wait(
            "pve4's soft taints",
            "const s = document.querySelector(\"#nodes .node[data-node='pve4'] .soft-taints\"); return s && s.textContent",
            20,
        )
        .await;
    // The demo's pve4 carries flxp.prefer-no.small in its notes.
    assert_eq!(soft, " · soft taints (avoided) small");

    // A node goes offline in the simulator (nothing through flxp): the poller sees it and the
    // page shows it within seconds, its figures unknown rather than zero.
    s.sim.sim().world().set_online("pve3", false);
    let figure = b
        .wait(
            "pve3 shown offline",
            "const f = document.querySelector(\"#nodes .node[data-node='pve3'] .figure.mem\"); \
             return f && f.textContent.startsWith('unknown') && f.textContent",
            20,
        )
        .await;
    assert_eq!(figure, "unknown (node offline)");
    assert_same_page(&b).await;

    // A VM created through the API appears in the guest count and the task pane.
    // As JSON: a string the script below compares with.
    let before = json!(text_of(&b, "guest-total").await);
    let v = s
        .gql(crate::serve::CREATE, {
            let mut vars = crate::serve::create_vars("live-web");
            vars["options"]["tags"] = json!([]);
            vars
        })
        .await;
    let vmid = v["data"]["createVM"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{v}"))
        .to_owned();
    let after = b
        .wait(
            "the new guest counted",
            &format!(
                "const t = document.getElementById('guest-total'); return t && t.textContent !== {before} && t.textContent"
            ),
            20,
        )
        .await;
    let st = s
        .query(r#"{ status(zone: "lab") { running guests } }"#)
        .await;
    assert_eq!(
        after,
        format!(
            "{} / {}",
            st["data"]["status"]["running"], st["data"]["status"]["guests"]
        )
    );
    let action = b
        .wait(
            "the creation in the task pane",
            "const l = document.querySelector('#action-list li[data-kind=created]'); return l && l.textContent",
            20,
        )
        .await;
    assert!(
        action.as_str().unwrap().ends_with(&format!(
            "flxp: created VM {vmid} (live-web) on {}",
            v["data"]["createVM"]["host"]["name"].as_str().unwrap()
        )),
        "{action}"
    );
    b.wait(
        "the clone task in the task pane",
        "return document.querySelector('#ptask-rows tr[data-type=qmclone][data-state=ok]')",
        20,
    )
    .await;

    // A rebalance through the API: its migrations show in the pane with their target.
    let run = s
        .query(
            r#"mutation { rebalance(zone: "lab") { done plan { migrations { vmid from to } } } }"#,
        )
        .await;
    let m = &run["data"]["rebalance"]["plan"]["migrations"][0];
    assert!(m.is_object(), "{run}");
    let row = b
        .wait(
            "the migration in the task pane",
            &format!(
                "const r = Array.from(document.querySelectorAll('#ptask-rows tr[data-type=qmigrate]')).find(r => r.children[2].textContent === 'qmigrate {} → {}'); return r && r.children[1].textContent",
                m["vmid"],
                m["to"].as_str().unwrap()
            ),
            20,
        )
        .await;
    assert_eq!(row, m["from"]);
    assert_same_page(&b).await;

    // History: the clone names the new VM (not only the template), a migration its target.
    open_view(
        &b,
        &s,
        "#/history",
        "the task history",
        "return document.getElementById('task-table')",
        20,
    )
    .await;
    let clone = eval(
        &b,
        "return document.querySelector('#task-table tr[data-type=qmclone] .guest').textContent",
    )
    .await;
    assert_eq!(clone, format!("{vmid} live-web (from template 9000)"));
    let moved = eval(&b, &format!(
        "return Array.from(document.querySelectorAll('#task-table tr[data-type=qmigrate]')).map(r => [r.querySelector('.guest').textContent, r.querySelector('.where').textContent]).find(x => x[0] === '{}')",
        m["vmid"]
    )).await;
    assert_eq!(
        moved,
        json!([
            m["vmid"].to_string(),
            format!(
                "{} → {}",
                m["from"].as_str().unwrap(),
                m["to"].as_str().unwrap()
            )
        ])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_clicks_create_one_vm_and_a_stale_plan_is_planned_again() {
    let (_one, s, b) = setup(1280, 900).await;
    login(&b, API_TOKEN).await;
    open_create(&b, &s).await;
    // The name pattern compiles (Chromium uses the `v` flag) and is checked on the page.
    let validity = eval(&b, "const n = document.getElementById('cv-name'); n.value = '-web'; const bad = n.validity.patternMismatch; n.value = 'web-1.lab'; return [bad, n.validity.patternMismatch]").await;
    assert_eq!(validity, json!([true, false]));
    b.type_into("#cv-name", "once-web").await;
    eval(&b, "document.getElementById('cv-compute').value = 'small'").await;
    b.type_into("#cv-key", KEY).await;
    let before = s.guest_count();
    // Three quick clicks: the first disables the button, and its key makes it one VM anyway.
    eval(&b, "const x = document.getElementById('create-submit'); x.click(); x.click(); x.click(); document.getElementById('create-form').requestSubmit()").await;
    let vmid = b
        .wait(
            "the new VM",
            "const c = document.getElementById('created'); return c && c.dataset.vmid",
            60,
        )
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        s.guest_count(),
        before + 1,
        "one submission, one VM ({vmid})"
    );
    assert_eq!(count(&b, "#created").await, json!(1));

    // A plan shown, then the cluster changes under it (a rebalance from elsewhere).
    open_balance(&b, &s).await;
    let shown = eval(
        &b,
        "return Number(document.getElementById('plan').dataset.migrations)",
    )
    .await;
    ask_to_carry_out(&b).await;
    // The confirmation lists each migration, the bytes to copy, restarts and marks.
    let plan = s
        .query(r#"{ rebalancePlan(zone: "lab") { migrations { vmid type online bytes } } }"#)
        .await;
    let migrations = plan["data"]["rebalancePlan"]["migrations"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(json!(migrations.len()), shown);
    assert_eq!(
        count(&b, "#confirm-migrations li").await,
        json!(migrations.len())
    );
    let summary = text_of(&b, "confirm-summary").await;
    let total: u64 = migrations
        .iter()
        .map(|m| m["bytes"].as_u64().unwrap())
        .sum();
    let total_text = eval(&b, &format!("const GiB = 1073741824; const n = {total}; return n >= 1024 * GiB ? (n / 1024 / GiB).toFixed(1) + ' TiB' : n >= GiB ? (n / GiB).toFixed(1) + ' GiB' : (n / 1048576).toFixed(0) + ' MiB'")).await;
    assert_eq!(
        summary,
        format!(
            "{} migrations, {} to copy.",
            migrations.len(),
            total_text.as_str().unwrap()
        )
    );
    assert_eq!(text_of(&b, "confirm-marks").await, "No node is marked.");
    let restarts = migrations
        .iter()
        .filter(|m| m["type"] == "lxc" && m["online"] == true)
        .count();
    let restart_text = text_of(&b, "confirm-restarts").await;
    if restarts == 0 {
        assert_eq!(restart_text, "No container restarts.");
    } else {
        assert!(
            restart_text.starts_with("Containers that restart"),
            "{restart_text}"
        );
    }
    let elsewhere = s
        .query(r#"mutation { rebalance(zone: "lab") { done } }"#)
        .await;
    assert!(
        elsewhere["data"]["rebalance"]["done"].as_u64() >= Some(1),
        "{elsewhere}"
    );
    let placed = s.query(GUESTS).await;
    b.click("#confirm-ok").await;
    b.wait(
        "the new plan",
        "return document.getElementById('plan-changed')",
        30,
    )
    .await;
    assert_eq!(s.query(GUESTS).await, placed, "a stale plan moved guests");
    // The new plan can be carried out, once: then its button is gone.
    if eval(&b, "return !!document.getElementById('carry-out')").await == json!(true) {
        ask_to_carry_out(&b).await;
        b.click("#confirm-ok").await;
        let state = b
            .wait("the end of the run", "const s = document.getElementById('run-status'); return s && s.dataset.state !== 'starting' && s.dataset.state !== 'running' && s.dataset.state", 90)
            .await;
        assert_eq!(state, "finished");
        assert_eq!(
            eval(
                &b,
                "const c = document.getElementById('carry-out'); return [c.hidden, c.dataset.state]"
            )
            .await,
            json!([true, "carried-out"])
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_page_sets_and_clears_maintenance_and_a_phone_never_scrolls_sideways() {
    let (_one, s, b) = setup(390, 844).await;
    login(&b, API_TOKEN).await;
    assert_eq!(overflows(&b).await, json!(false), "zone view");
    open_view(
        &b,
        &s,
        "#/node/pve2",
        "the node page",
        "return document.getElementById('maintenance-on')",
        20,
    )
    .await;
    assert_eq!(overflows(&b).await, json!(false), "node view");
    crate::dashboard::ask(&b, "#maintenance-on").await;
    let text = text_of(&b, "confirm-text").await;
    assert!(
        text.starts_with("Writes flxp.maintenance into the notes of pve2."),
        "{text}"
    );
    b.click("#confirm-ok").await;
    // The page redraws on the change: the button turns into its opposite.
    b.wait(
        "the clear button",
        "return document.getElementById('maintenance-off')",
        20,
    )
    .await;
    let notes = s.sim.sim().world().nodes["pve2"].notes.clone();
    assert!(notes.contains("flxp.maintenance"), "{notes}");
    crate::dashboard::click_and_confirm(&b, "#maintenance-off").await;
    b.wait(
        "the set button",
        "return document.getElementById('maintenance-on')",
        20,
    )
    .await;
    let notes = s.sim.sim().world().nodes["pve2"].notes.clone();
    assert!(!notes.contains("flxp.maintenance"), "{notes}");
    // "Evacuate this node" opens its plan.
    b.click("#evacuate-node").await;
    b.wait("the evacuation plan of pve2", "return document.getElementById('evac-node').value === 'pve2' && document.getElementById('plan')", 30).await;
    assert_eq!(overflows(&b).await, json!(false), "evacuation view");

    // What-if: the score bars are weighted, and a line names what decided.
    open_place(&b, &s).await;
    submit_place(&b).await;
    assert_eq!(overflows(&b).await, json!(false), "what-if view");
    let p = s
        .query(r#"query { placement(zone: "lab", request: { memory: "4GiB", cores: 2, tags: [] }, explain: true) { node candidates { node scores { scorer score weight } } } }"#)
        .await;
    let shares = eval(&b, "return Array.from(document.querySelectorAll('#candidates tbody tr')).map(r => Array.from(r.querySelectorAll('.shares span')).map(s => [s.dataset.scorer, Number(s.dataset.share)]))").await;
    let mut weights = Vec::new();
    for (c, shown) in p["data"]["placement"]["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .zip(shares.as_array().unwrap())
    {
        let scores = c["scores"].as_array().unwrap();
        let total: f64 = scores
            .iter()
            .map(|x| x["score"].as_f64().unwrap() * x["weight"].as_f64().unwrap())
            .sum();
        for (x, sh) in scores.iter().zip(shown.as_array().unwrap()) {
            weights.push(x["weight"].as_f64().unwrap());
            let want = 100.0 * x["score"].as_f64().unwrap() * x["weight"].as_f64().unwrap() / total;
            assert_eq!(sh[0], x["scorer"]);
            assert!((sh[1].as_f64().unwrap() - want).abs() < 0.06, "{sh} {want}");
        }
    }
    assert!(
        weights.contains(&1.0) && weights.contains(&10.0),
        "{weights:?}"
    );
    let decided = text_of(&b, "place-decided").await;
    assert!(
        decided.starts_with(&format!(
            "{} over ",
            p["data"]["placement"]["node"].as_str().unwrap()
        )),
        "{decided}"
    );
    assert!(decided.contains(": decided by "), "{decided}");

    // A zone without profiles or images: the create form says what is missing.
    let bare = crate::serve::start_without_catalog(Scenario::demo(), "").await;
    b.goto(&format!("{}/", bare.url)).await;
    login(&b, API_TOKEN).await;
    open_view(
        &b,
        &bare,
        "#/create",
        "the create form",
        "return document.getElementById('create-missing')",
        20,
    )
    .await;
    let missing = text_of(&b, "create-missing").await;
    assert!(
        missing.starts_with("VMs cannot be created here yet: the config has no image"),
        "{missing}"
    );
    assert_eq!(
        eval(
            &b,
            "return document.getElementById('create-submit').disabled"
        )
        .await,
        json!(true)
    );
}
