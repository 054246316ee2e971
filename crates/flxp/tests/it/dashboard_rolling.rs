//! The dashboard's rolling maintenance in a real browser (see `dashboard.rs`): the dry run's
//! schedule is the API's, a run started from the page is followed live, a failed step shows its
//! reason and the node's "still here" state, and a reload shows the same progress, read from
//! Proxmox rather than the page's memory.

use flxp_sim::Scenario;
use serde_json::json;

use crate::dashboard::{
    GUESTS, ONE_BROWSER, click_and_confirm, eval, login, open_view, shot, submit, text_of,
    viewer_config,
};
use crate::serve::{API_TOKEN, start};
use crate::webdriver::Browser;

/// Ticks the node boxes of the rolling form so that exactly `nodes` are chosen.
async fn choose(b: &Browser, nodes: &[&str]) {
    b.js(
        "document.querySelectorAll('#rolling-form input[name=rl-node]').forEach(c => c.checked = arguments[0].includes(c.value))",
        json!([nodes]),
    )
    .await;
}

/// Plans the schedule of the nodes chosen, starts it and confirms.
async fn plan_and_start(b: &Browser) {
    submit(
        b,
        "#rolling-form",
        "the schedule",
        "return document.getElementById('rolling-schedule')",
        30,
    )
    .await;
    click_and_confirm(b, "#rolling-start").await;
    b.wait(
        "the run started",
        "return document.getElementById('rolling-running')",
        30,
    )
    .await;
}

/// Waits until the progress row of `node` is in `state`: its detail and the node's maintenance
/// state (summary, `data-safe`).
async fn row_in(b: &Browser, node: &str, state: &str, secs: u64) -> serde_json::Value {
    let script = format!(
        "const r = document.querySelector(\"#rolling-table tr[data-node='{node}']\"); \
         if (!r || r.dataset.state !== '{state}') return null; \
         const m = r.querySelector('.maintenance-state'); \
         return [r.querySelector('.detail').textContent, m ? m.innerText : '', m ? m.dataset.safe : '']"
    );
    b.wait(&format!("{node} {state}"), &script, secs).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_maintenance_is_planned_started_and_followed_across_a_reload() {
    crate::webdriver::require_browser();
    let _one = ONE_BROWSER.lock().await;
    // The hook fails until its `ok` file exists.
    let dir = tempfile::tempdir().unwrap();
    let hook = dir.path().join("hook.sh");
    let ok = dir.path().join("ok");
    std::fs::write(
        &hook,
        format!(
            "test -f {} || {{ echo 'apt: no space left' >&2; exit 7; }}\n",
            ok.display()
        ),
    )
    .unwrap();
    let hook_cmd = format!("sh {}", hook.display());
    let extra = format!("{}\n[rolling]\nhook = \"{hook_cmd}\"\n", viewer_config());
    let s = start(Scenario::demo(), &extra, &[]).await;
    let before = s.query(GUESTS).await;
    let booted = s.sim.sim().world().nodes["pve2"].booted_at;
    let b = Browser::start(1280, 900).await;
    crate::dashboard::open(&b, &s, "").await;
    login(&b, API_TOKEN).await;
    open_view(
        &b,
        &s,
        "#/rolling",
        "the rolling form and its progress",
        "return document.querySelectorAll('#rolling-form input[name=rl-node]').length === 4 && \
         document.getElementById('rolling-status')",
        30,
    )
    .await;
    assert_eq!(
        eval(
            &b,
            "return document.getElementById('rolling-status').dataset.state"
        )
        .await,
        "idle"
    );

    // The dry run: the schedule of pve2 is the API's evacuation plan, with the server's hook.
    choose(&b, &["pve2"]).await;
    submit(
        &b,
        "#rolling-form",
        "the schedule",
        "return document.getElementById('rolling-schedule')",
        30,
    )
    .await;
    let ev = s
        .query(r#"{ evacuationPlan(zone: "lab", node: "pve2") { migrations { vmid } } }"#)
        .await;
    let planned = ev["data"]["evacuationPlan"]["migrations"]
        .as_array()
        .unwrap()
        .len();
    assert!(planned > 0, "{ev}");
    let row = eval(&b, "const r = document.querySelector(\"#rolling-schedule-table tr[data-node='pve2']\"); return [Number(r.dataset.migrations), Number(r.dataset.bytes), Number(r.dataset.secs), document.querySelectorAll('#rolling-schedule-table tbody > tr').length]").await;
    let api = s
        .query(r#"{ rollingSchedule(zone: "lab", nodes: ["pve2"]) { bytes estimatedSecs nodes { node } } }"#)
        .await;
    let sc = &api["data"]["rollingSchedule"];
    assert_eq!(
        row,
        json!([planned, sc["bytes"], sc["estimatedSecs"], 1]),
        "{api}"
    );
    assert_eq!(
        text_of(&b, "rolling-hook").await,
        format!("Hook (from the server's config): {hook_cmd} NODE")
    );
    shot(&b, "rolling-schedule").await;

    // Started: the hook fails; the page says why, and that the emptied node is safe to reboot.
    click_and_confirm(&b, "#rolling-start").await;
    let failed = row_in(&b, "pve2", "failed", 120).await;
    assert_eq!(
        failed[0],
        format!("stopped at hook: hook \"{hook_cmd}\" failed (exit code 7): apt: no space left"),
        "{failed}"
    );
    assert_eq!(failed[1], "empty, safe to reboot", "{failed}");
    assert_eq!(failed[2], "true", "{failed}");
    assert_eq!(
        eval(
            &b,
            "return document.getElementById('rolling-status').dataset.state"
        )
        .await,
        "stopped"
    );

    // A reload shows the same: the progress is Proxmox's, not the page's.
    eval(&b, "location.reload()").await;
    let again = row_in(&b, "pve2", "failed", 60).await;
    assert_eq!(again, failed);
    shot(&b, "rolling-failed").await;

    // Fixed and started again for pve4: pve2 is finished first (hook, reboot, home), then pve4
    // stops before its reboot, the ignored 151 still running there.
    std::fs::write(&ok, "").unwrap();
    b.wait(
        "the form after the reload",
        "return document.querySelectorAll('#rolling-form input[name=rl-node]').length === 4",
        30,
    )
    .await;
    choose(&b, &["pve4"]).await;
    plan_and_start(&b).await;
    let done = row_in(&b, "pve2", "done", 180).await;
    assert_eq!(done[0], "done", "{done}");
    let left = row_in(&b, "pve4", "failed", 180).await;
    let detail = left[0].as_str().unwrap();
    assert!(
        detail.starts_with(
            "stopped at evacuating: 1 running guest(s) still on it, a reboot would stop them: 151 \
             (tagged flxp.ignore"
        ),
        "{detail}"
    );
    let here = left[1].as_str().unwrap();
    assert!(
        here.starts_with("1 running guest still here, not safe to reboot"),
        "{here}"
    );
    assert!(
        here.contains("still here: 151 monitoring: tagged flxp.ignore"),
        "{here}"
    );
    assert_eq!(left[2], "false");
    shot(&b, "rolling-still-here").await;
    assert!(
        s.sim.sim().world().nodes["pve2"].booted_at > booted,
        "pve2 rebooted"
    );
    // pve2's guests are home (with some of pve4's); pve4's are away while it stays in
    // maintenance.
    let after = s.query(GUESTS).await;
    let on = |v: &serde_json::Value, node: &str| {
        crate::dashboard::api_vmids(&v["data"]["guests"], |g| g["node"] == node)
    };
    let home = on(&after, "pve2");
    for vmid in on(&before, "pve2") {
        assert!(home.contains(&vmid), "{vmid} not back on pve2: {home:?}");
    }
    assert_eq!(on(&after, "pve4"), vec![151]);
}
