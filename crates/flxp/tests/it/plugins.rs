//! External plugins end to end with the shipped examples (`examples/plugins/`): filter, score and
//! balance plugins over the exec transport, filter and score over HTTP, through `flxp place`,
//! `flxp balance` and `flxp serve` against the in-process simulator; and every failure policy
//! with a plugin that hangs, crashes, prints garbage, answers too much or lies.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use flxp_sim::Scenario;
use serde_json::{Value, json};

use super::{example, on_file, run, temp_file};

/// The Python interpreter itself (not a version manager's shim, whose start alone can take a
/// second on a busy machine). Fails (never skips) when python3 is missing, naming how to install it.
fn python() -> &'static str {
    static PYTHON: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PYTHON.get_or_init(|| {
        let out = Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output();
        let path = out
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .filter(|p| !p.is_empty());
        path.unwrap_or_else(|| {
            panic!(
                "python3 is missing: the plugin tests run the Python examples in examples/plugins; \
                 install it with `apt-get install python3` (Debian) or your system's package manager"
            )
        })
    })
}

fn script(name: &str) -> String {
    example(&format!("plugins/{name}"))
        .canonicalize()
        .unwrap()
        .display()
        .to_string()
}

fn snapshot() -> String {
    example("pvesh-4node.json").display().to_string()
}

/// A `[[plugin]]` table running one of the examples with arguments.
fn exec_plugin(name: &str, kind: &str, file: &str, args: &[&str], extra: &str) -> String {
    let mut argv = vec![json!(python()), json!(script(file))];
    argv.extend(args.iter().map(|a| json!(a)));
    // A generous timeout unless the test sets one: a Python start is slow on a loaded machine.
    let timeout = if extra.contains("timeout-ms") {
        ""
    } else {
        "timeout-ms = 60000\n"
    };
    format!(
        "[[plugin]]\nname = \"{name}\"\nkind = \"{kind}\"\ncommand = {}\n{timeout}{extra}\n",
        Value::Array(argv)
    )
}

/// The licence filter plugin, reading the nodes holding a licence (`licences`) from a file in `dir`.
fn licence_plugin(dir: &Path, licences: &str, extra: &str) -> String {
    let file = dir.join("licences.txt");
    std::fs::write(&file, licences).unwrap();
    exec_plugin(
        "licences",
        "filter",
        "licence_filter.py",
        &[file.to_str().unwrap()],
        extra,
    )
}

/// The price score plugin, reading every demo node's price from a file in `dir`.
fn price_plugin(dir: &Path) -> String {
    let file = dir.join("prices.txt");
    std::fs::write(&file, "pve1 0.05\npve2 0.05\npve3 0.10\npve4 0.30\n").unwrap();
    exec_plugin(
        "price",
        "score",
        "price_score.py",
        &[file.to_str().unwrap()],
        "",
    )
}

fn place(config: &Path, extra: &[&str]) -> (i32, String, String) {
    let snap = snapshot();
    let mut args = vec![
        "place",
        "--from-file",
        &snap,
        "--config",
        config.to_str().unwrap(),
        "--memory",
        "4GiB",
        "--cores",
        "2",
    ];
    args.extend_from_slice(extra);
    run(&args)
}

fn candidate<'a>(v: &'a Value, node: &str) -> &'a Value {
    v["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["node"] == node)
        .unwrap()
}

#[test]
fn place_honours_the_licence_filter_and_the_price_score() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("flxp.toml");
    let licences = "# nodes with a Windows licence\npve3\npve4\n";
    let text = licence_plugin(dir.path(), licences, "")
        + &price_plugin(dir.path())
        + "[policies.cheap]\nfree-memory = 1\nprice = 5\n";
    std::fs::write(&config, text).unwrap();

    // Without the windows tag the filter allows every node; free-memory picks pve2.
    let (code, out, err) = place(&config, &["--json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["node"], "pve2", "{v}");

    // A Windows VM only goes to licensed nodes; by free memory that is pve4...
    let (code, out, err) = place(&config, &["--tag", "windows", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["node"], "pve4", "{v}");
    let pve1 = candidate(&v, "pve1");
    assert_eq!(pve1["feasible"], false);
    assert_eq!(
        pve1["reasons"],
        json!(["licences: no Windows licence on this node"])
    );

    // ...and with the price plugin weighed in, the cheaper pve3, its share shown per node.
    let (code, out, err) = place(
        &config,
        &["--tag", "windows", "--policy", "cheap", "--json"],
    );
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["node"], "pve3", "{v}");
    assert_eq!(candidate(&v, "pve3")["scores"]["price"], 100.0);
    assert_eq!(candidate(&v, "pve4")["scores"]["price"], 0.0);

    let (code, out, _) = place(
        &config,
        &["--tag", "windows", "--policy", "cheap", "--explain"],
    );
    assert_eq!(code, 0);
    assert!(out.contains("price"), "{out}");
    assert!(
        out.contains("licences: no Windows licence on this node"),
        "{out}"
    );
}

/// Runs the misbehaving plugin as a filter with a policy; the exit code, stdout and stderr.
fn misbehaving(mode: &str, on_failure: &str) -> (i32, String, String) {
    // Only the sleeper is meant to time out: the others get time to start on a busy machine.
    let timeout = if mode == "sleep" { 500 } else { 60_000 };
    let extra =
        format!("timeout-ms = {timeout}\nmax-answer-bytes = 65536\non-failure = \"{on_failure}\"");
    let text = exec_plugin("bad", "filter", "misbehave.py", &[mode], &extra);
    let (_dir, config) = temp_file("flxp.toml", &text);
    place(&config, &["--json"])
}

#[test]
fn a_misbehaving_plugin_is_ignored_with_a_warning_or_refuses_the_placement() {
    let cases = [
        ("sleep", "timed out after 500 ms"),
        (
            "crash",
            "exited with exit status: 1: licence server unreachable",
        ),
        ("garbage", "not a valid filter answer"),
        ("huge", "answer is larger than 65536 bytes"),
        (
            "unknown-node",
            "answered for node \\\"ghost\\\", which is not a candidate",
        ),
        (
            "wrong-kind",
            "answered with kind \\\"score\\\", expected \\\"filter\\\"",
        ),
    ];
    for (mode, said) in cases {
        let (code, out, err) = misbehaving(mode, "ignore");
        assert_eq!(code, 0, "{mode}: {err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["node"], "pve2", "{mode}: decided without the plugin");
        let warnings = v["warnings"].to_string();
        assert!(
            warnings.contains("plugin bad") && warnings.contains(said),
            "{mode}: {warnings}"
        );

        let (code, out, err) = misbehaving(mode, "fail");
        assert_ne!(code, 0, "{mode}: {out}");
        let said = said.replace("\\\"", "\"");
        assert!(
            err.contains("plugin bad: ") && err.contains(&said),
            "{mode}: {err}"
        );
    }
}

#[test]
fn config_errors_name_the_plugin_and_the_key() {
    for (table, said) in [
        (
            "name = \"p\"\nkind = \"filter\"\n",
            "plugin \"p\": give exactly one of `command` or `url`",
        ),
        (
            "name = \"p\"\nkind = \"score\"\nurl = \"ftp://x\"\n",
            "plugin \"p\": url must start with http:// or https://",
        ),
        (
            "name = \"p\"\nkind = \"filter\"\ncommand = [\"x\"]\ntimeout-ms = 0\n",
            "plugin \"p\": timeout-ms must be 1..=600000",
        ),
        (
            "name = \"free-memory\"\nkind = \"score\"\ncommand = [\"x\"]\n",
            "is a built-in filter, scorer or method",
        ),
        (
            "name = \"p\"\nkind = \"sort\"\ncommand = [\"x\"]\n",
            "unknown variant `sort`",
        ),
    ] {
        let (_dir, config) = temp_file("flxp.toml", &format!("[[plugin]]\n{table}"));
        let (code, _, err) = place(&config, &["--json"]);
        assert_ne!(code, 0);
        assert!(err.contains(said), "{table}: {err}");
    }
}

fn balance(config: &Path, method: &str) -> (i32, Value, String) {
    let snap = snapshot();
    let (code, out, err) = on_file(
        "balance",
        &snap,
        &[
            "--config",
            config.to_str().unwrap(),
            "--method",
            method,
            "--json",
        ],
    );
    let v = serde_json::from_str(&out).unwrap_or(Value::Null);
    (code, v, err)
}

#[test]
fn balance_plans_the_plugin_s_safe_proposals_and_refuses_unsafe_ones() {
    let text = exec_plugin("drain-fullest", "balance", "balance_module.py", &["2"], "")
        + &exec_plugin("unsafe", "balance", "misbehave.py", &["unsafe"], "");
    let (_dir, config) = temp_file("flxp.toml", &text);
    // The same plugins where a large reserve leaves little room anywhere.
    let (_dir2, tight) = temp_file(
        "flxp.toml",
        &(text.clone() + "[placement]\nreserve = \"230GiB\"\n"),
    );

    let (code, v, err) = balance(&config, "drain-fullest");
    assert!(code == 0 || code == 3, "{err}");
    let plan = &v;
    assert_eq!(plan["method"], "drain-fullest", "{v}");
    let migrations = plan["migrations"].as_array().unwrap();
    assert!(!migrations.is_empty(), "{v}");
    for m in migrations {
        assert_eq!(m["from"], "pve1", "{m}");
        assert!(
            m["reason"]
                .as_str()
                .unwrap()
                .starts_with("plugin drain-fullest: pve1 is the fullest"),
            "{m}"
        );
    }

    let (_, v, err) = balance(&tight, "unsafe");
    let plan = &v;
    assert_eq!(plan["migrations"], json!([]), "{v} {err}");
    // Refusals are the proposals' verdicts, not `skipped` guests or
    // warnings.
    let proposals = plan["plugin"]["proposals"].to_string();
    assert!(
        proposals.contains("\"target\":\"pve2\"") && proposals.contains("memory: needs"),
        "{proposals}"
    );
    assert!(proposals.contains("template"), "{proposals}");
    assert!(
        proposals.contains("guest 99999 is not in the zone"),
        "{proposals}"
    );

    // The config's default method may be a balance plugin too (the daemon's rounds use it).
    let (_dir3, default) = temp_file(
        "flxp.toml",
        &(text.clone() + "[balance]\nmethod = \"drain-fullest\"\n"),
    );
    let snap = snapshot();
    let (code, out, err) = on_file(
        "balance",
        &snap,
        &["--config", default.to_str().unwrap(), "--json"],
    );
    assert!(code == 0 || code == 3, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["method"], "drain-fullest", "{v}");

    // An unknown method names the known ones, plugins included.
    let (code, _, err) = balance(&config, "nope");
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("drain-fullest") && err.contains("unsafe"),
        "{err}"
    );
}

/// The example HTTP extender on a free port, denying some nodes; killed on drop.
struct Extender {
    child: Child,
    port: u16,
}

impl Drop for Extender {
    fn drop(&mut self) {
        // Only the server this test started, by its handle.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn extender(denied: &[&str]) -> Extender {
    let mut child = Command::new(python())
        .arg(script("http_extender.py"))
        .arg("0")
        .args(denied)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .trim()
        .trim_start_matches("listening on ")
        .parse()
        .unwrap();
    Extender { child, port }
}

fn http_plugins(port: u16) -> String {
    format!(
        "[[plugin]]\nname = \"rack-power\"\nkind = \"filter\"\nurl = \"http://127.0.0.1:{port}/filter\"\ntimeout-ms = 30000\n\n\
         [[plugin]]\nname = \"fewest-guests\"\nkind = \"score\"\nurl = \"http://127.0.0.1:{port}/score\"\ntimeout-ms = 30000\n\n\
         [policies.few]\nfewest-guests = 1\n"
    )
}

#[test]
fn place_honours_an_http_extender() {
    let ext = extender(&["pve4"]);
    let (_dir, config) = temp_file("flxp.toml", &http_plugins(ext.port));
    let (code, out, err) = place(&config, &["--policy", "few", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        candidate(&v, "pve4")["reasons"],
        json!(["rack-power: rack power budget reached"])
    );
    // Of the others, pve3 runs the fewest guests.
    assert_eq!(v["node"], "pve3", "{v}");
    assert_eq!(candidate(&v, "pve3")["scores"]["fewest-guests"], 100.0);

    // An extender that is gone is a failure like any other.
    let port = ext.port;
    drop(ext);
    let (_dir, config) = temp_file("flxp.toml", &http_plugins(port));
    let (code, out, _) = place(&config, &["--json"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("plugin rack-power") && out.contains("decided without it"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_explains_plugins_in_placements_and_plans_with_balance_plugins() {
    let dir = tempfile::tempdir().unwrap();
    let extra = licence_plugin(dir.path(), "pve1\npve2\n", "on-failure = \"fail\"")
        + &exec_plugin("drain-fullest", "balance", "balance_module.py", &["1"], "");
    let s = super::serve::start(Scenario::demo(), &extra, &[]).await;
    let v = s
        .query(r#"query { placement(zone: "lab", request: { memory: "2GiB", cores: 1, tags: ["windows"] }, explain: true) {
                node warnings candidates { node feasible reasons scores { scorer score } } } }"#)
        .await;
    let p = &v["data"]["placement"];
    let node = p["node"].as_str().unwrap_or_default();
    assert!(node == "pve1" || node == "pve2", "{v}");
    // Nodes that pass flxp's own filters but hold no licence are refused by the plugin, by name.
    let refused = p["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| {
            c["reasons"]
                .to_string()
                .contains("licences: no Windows licence")
        })
        .count();
    assert!(refused > 0, "{v}");

    let v = s.query("query { balanceMethods { name } }").await;
    assert!(v.to_string().contains("drain-fullest"), "{v}");
    let v = s
        .query(r#"query { rebalancePlan(zone: "lab", method: "drain-fullest") { method summary migrations { vmid reason } } }"#)
        .await;
    assert_eq!(v["data"]["rebalancePlan"]["method"], "drain-fullest", "{v}");
}

/// An error in the second `[[plugin]]` points at that table's
/// line, not the first one's, and names the plugin and the key in plain words.
#[test]
fn a_config_error_points_at_the_plugin_that_is_wrong() {
    let good = "[[plugin]]\nname = \"ok\"\nkind = \"filter\"\ncommand = [\"x\"]\n\n";
    for (table, line, said) in [
        (
            "[[plugin]]\nname = \"p\"\nkind = \"filter\"\n",
            6,
            "plugin \"p\": give exactly one of `command` or `url`",
        ),
        (
            "[[plugin]]\nname = \"p\"\nkind = \"score\"\nurl = \"ftp://x\"\n",
            9,
            "plugin \"p\": url must start with http:// or https://",
        ),
        (
            "[[plugin]]\nname = \"p\"\nkind = \"filter\"\ncommand = [\"x\"]\ntimeout-ms = 0\n",
            10,
            "plugin \"p\": timeout-ms must be 1..=600000",
        ),
        (
            "[[plugin]]\nname = \"p\"\nkind = \"sort\"\ncommand = [\"x\"]\n",
            8,
            "plugin[1].kind: plugin \"p\": unknown variant `sort`",
        ),
    ] {
        let text = format!("{good}{table}");
        let (_dir, config) = temp_file("flxp.toml", &text);
        let (code, _, err) = place(&config, &["--json"]);
        assert_ne!(code, 0);
        assert!(err.contains(said), "{table}: {err}");
        assert!(
            err.contains(&format!("flxp.toml:{line}:")),
            "{table}: line {line} expected: {err}"
        );
    }
}

/// A filter or balance plugin named in a policy says what it is and
/// where it belongs, rather than "unknown scorer".
#[test]
fn a_plugin_of_another_kind_in_a_policy_says_where_it_belongs() {
    for (kind, said) in [
        (
            "filter",
            "plugin \"lic\" is a filter plugin: filter plugins run in every placement",
        ),
        (
            "balance",
            "plugin \"lic\" is a balance plugin: use it as a method",
        ),
    ] {
        let text = format!(
            "[[plugin]]\nname = \"lic\"\nkind = \"{kind}\"\ncommand = [\"x\"]\n\n[policies.mine]\nfree-memory = 1\nlic = 2\n"
        );
        let (_dir, config) = temp_file("flxp.toml", &text);
        let (code, _, err) = place(&config, &["--json"]);
        assert_ne!(code, 0);
        assert!(
            err.contains("policies.mine.lic") && err.contains(said),
            "{kind}: {err}"
        );
        assert!(!err.contains("unknown scorer"), "{kind}: {err}");
    }
    // And a filter or score plugin given as a balancing method says so too.
    let text = "[[plugin]]\nname = \"price\"\nkind = \"score\"\ncommand = [\"x\"]\n";
    let (_dir, config) = temp_file("flxp.toml", text);
    let (code, _, err) = balance(&config, "price");
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("plugin \"price\" is a score plugin, not a balance plugin"),
        "{err}"
    );
}

/// A balance plugin that fails is the headline, by name and error,
/// and the exit code says the request is unmet (3 with `ignore`) or refused (1 with `fail`),
/// never "the imbalance stays above the threshold".
#[test]
fn a_failed_balance_plugin_is_the_headline_and_the_exit_code() {
    let snap = snapshot();
    for (mode, said) in [
        (
            "crash",
            "exited with exit status: 1: licence server unreachable",
        ),
        ("garbage", "not a valid balance answer"),
        ("sleep", "timed out after 500 ms"),
    ] {
        let timeout = if mode == "sleep" { 500 } else { 60_000 };
        for on_failure in ["ignore", "fail"] {
            let text = exec_plugin(
                "bad",
                "balance",
                "misbehave.py",
                &[mode],
                &format!("timeout-ms = {timeout}\non-failure = \"{on_failure}\""),
            );
            let (_dir, config) = temp_file("flxp.toml", &text);
            let cfg = config.to_str().unwrap();
            let args = [
                "balance",
                "--from-file",
                &snap,
                "--config",
                cfg,
                "--method",
                "bad",
            ];
            let (code, out, err) = run(&args);
            let all = format!("{out}{err}");
            assert!(
                !all.contains("imbalance stays above"),
                "{mode}/{on_failure}: {all}"
            );
            if on_failure == "ignore" {
                assert_eq!(code, 3, "{mode}: {all}");
                let head = out
                    .lines()
                    .find(|l| l.starts_with("not met"))
                    .unwrap_or_default();
                assert!(
                    head.contains("balance plugin bad failed: ") && head.contains(said),
                    "{mode}: {out}"
                );
                let (code, v, _) = balance(&config, "bad");
                assert_eq!(code, 3);
                let unmet = v["unmet"].to_string();
                assert!(unmet.contains("balance plugin bad failed: "), "{unmet}");
                assert_eq!(v["plugin"]["plugin"], "bad", "{v}");
                assert!(v["plugin"]["error"].as_str().unwrap().contains(said), "{v}");
            } else {
                assert_eq!(code, 1, "{mode}: {all}");
                assert!(
                    err.contains("plugin bad: ") && err.contains(said),
                    "{mode}: {err}"
                );
            }
        }
    }
}

/// Every proposal gets exactly one verdict, accepted or refused with
/// its kind and reason, in `--json` and for people; refusals are not "not movable" guests.
#[test]
fn every_balance_proposal_gets_exactly_one_verdict() {
    let text = exec_plugin("unsafe", "balance", "misbehave.py", &["unsafe"], "")
        + "[placement]\nreserve = \"230GiB\"\n";
    let (_dir, config) = temp_file("flxp.toml", &text);
    let (_, v, err) = balance(&config, "unsafe");
    let proposals = v["plugin"]["proposals"]
        .as_array()
        .unwrap_or_else(|| panic!("{v} {err}"));
    // misbehave.py proposes: the biggest guest to another node (no room), a template to another
    // node, a guest that does not exist, and the biggest guest again to a node that does not exist.
    let kinds: Vec<&str> = proposals
        .iter()
        .map(|p| p["refused"].as_str().unwrap_or("accepted"))
        .collect();
    assert_eq!(
        kinds,
        ["overcommit", "not-movable", "unknown-guest", "unknown-node"],
        "{v}"
    );
    let big = proposals[0]["vmid"].clone();
    assert_eq!(proposals[3]["vmid"], big);
    assert_eq!(proposals[3]["target"], "ghost");
    assert!(
        proposals[2]["why"]
            .as_str()
            .unwrap()
            .contains("guest 99999 is not in the zone")
    );
    assert!(
        proposals[0]["why"]
            .as_str()
            .unwrap()
            .contains("memory: needs"),
        "{v}"
    );
    // Refusals are verdicts, not guests skipped for being unmovable.
    assert!(!v["skipped"].to_string().contains("plugin unsafe"), "{v}");

    let snap = snapshot();
    let cfg = config.to_str().unwrap();
    let (_, out, _) = on_file("balance", &snap, &["--config", cfg, "--method", "unsafe"]);
    let lines: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("plugin unsafe proposed 4 migration(s)"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert!(
        lines[3].contains("→ ghost (no such node): refused (unknown node)"),
        "{out}"
    );
    assert!(lines[1].contains("refused (not movable)"), "{out}");
    assert!(!out.contains("not movable (ignored, locked"), "{out}");
}

/// With `ignore`, every failure is logged as a warning naming the
/// plugin and what was wrong, answer-format failures included.
#[test]
fn every_ignored_plugin_failure_is_logged() {
    for (mode, said) in [
        ("garbage", "not a valid filter answer"),
        ("unknown-node", "which is not a candidate"),
        ("wrong-kind", "answered with kind"),
        ("huge", "answer is larger than 65536 bytes"),
        ("crash", "exited with exit status: 1"),
    ] {
        let (code, _, err) = misbehaving(mode, "ignore");
        assert_eq!(code, 0, "{mode}: {err}");
        let logged: Vec<&str> = err
            .lines()
            .filter(|l| l.contains("WARN") && l.contains("bad") && l.contains(said))
            .collect();
        assert_eq!(logged.len(), 1, "{mode}: logged once: {err}");
    }
}

/// Soft-rule scorers join custom policies on purpose; `--explain`
/// says so, with the policy's weights.
#[test]
fn explain_shows_the_policy_s_weights_and_the_soft_rules_it_carries() {
    let dir = tempfile::tempdir().unwrap();
    let text =
        price_plugin(dir.path()) + "[policies.cheap]\nfree-memory = 1\nprice = 5\nprefer-no = 0\n";
    let (_d, config) = temp_file("flxp.toml", &text);
    let (code, out, err) = place(&config, &["--policy", "cheap", "--explain"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("policy cheap: free-memory 1, price 5 (plugin)"),
        "{out}"
    );
    assert!(
        out.contains("soft rules added to every policy unless set to 0: prefer-node 10, prefer-affinity 10, prefer-anti-affinity 10"),
        "{out}"
    );
    assert!(!out.contains("prefer-no 10"), "{out}");
}

/// Plugins called by `flxp serve` (placement, createVM, plans) are
/// told the zone, as `flxp place --zone` tells them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_tells_plugins_the_zone() {
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("zones.txt");
    let recorder = dir.path().join("recorder.py");
    // Records the zone of each request, allows every node and proposes nothing.
    std::fs::write(
        &recorder,
        format!(
            "import json, sys\nr = json.load(sys.stdin)\nopen({:?}, 'a').write(r['kind'] + ' ' + str(r['zone']) + '\\n')\n\
             if r['kind'] == 'filter':\n    json.dump({{'protocol': 1, 'kind': 'filter', 'nodes': [{{'node': n['name'], 'allowed': True}} for n in r['nodes']]}}, sys.stdout)\n\
             else:\n    json.dump({{'protocol': 1, 'kind': 'balance', 'migrations': []}}, sys.stdout)\n",
            seen.display().to_string()
        ),
    )
    .unwrap();
    let plugin = |name: &str, kind: &str| {
        format!(
            "[[plugin]]\nname = \"{name}\"\nkind = \"{kind}\"\ncommand = [{:?}, {:?}]\ntimeout-ms = 60000\non-failure = \"fail\"\n\n",
            python(),
            recorder.display().to_string()
        )
    };
    let extra = plugin("rec", "filter") + &plugin("rec-balance", "balance");
    let s = super::serve::start(Scenario::demo(), &extra, &[]).await;
    s.assert_placed(r#"{ memory: "1GiB", cores: 1 }"#).await;
    let v = s
        .query(r#"query { rebalancePlan(zone: "lab", method: "rec-balance") { method } }"#)
        .await;
    assert_eq!(v["data"]["rebalancePlan"]["method"], "rec-balance", "{v}");
    let lines = std::fs::read_to_string(&seen).unwrap();
    assert!(lines.contains("filter lab\n"), "{lines}");
    assert!(lines.contains("balance lab\n"), "{lines}");
    assert!(!lines.contains("None"), "{lines}");
}
