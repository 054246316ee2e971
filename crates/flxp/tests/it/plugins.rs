//! External plugins end to end with the shipped examples (`examples/plugins/`): filter, score and
//! balance plugins over the exec transport, filter and score over HTTP, through `flxp place`,
//! `flxp balance` and `flxp serve` against the in-process simulator; and every failure policy
//! with a plugin that hangs, crashes, prints garbage, answers too much or lies.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use flxp_sim::Scenario;
use serde_json::{Value, json};

use super::{example, run, temp_file};

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
    let licences = dir.path().join("licences.txt");
    std::fs::write(&licences, "# nodes with a Windows licence\npve3\npve4\n").unwrap();
    let prices = dir.path().join("prices.txt");
    std::fs::write(&prices, "pve1 0.05\npve2 0.05\npve3 0.10\npve4 0.30\n").unwrap();
    let config = dir.path().join("flxp.toml");
    let text = exec_plugin(
        "licences",
        "filter",
        "licence_filter.py",
        &[licences.to_str().unwrap()],
        "",
    ) + &exec_plugin(
        "price",
        "score",
        "price_score.py",
        &[prices.to_str().unwrap()],
        "",
    ) + "[policies.cheap]\nfree-memory = 1\nprice = 5\n";
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
            "plugin \"p\": command/url give exactly one",
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
    let (code, out, err) = run(&[
        "balance",
        "--from-file",
        &snap,
        "--config",
        config.to_str().unwrap(),
        "--method",
        method,
        "--json",
    ]);
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
    let skipped = plan["skipped"].to_string();
    assert!(
        skipped.contains("plugin unsafe proposed moving it to pve2: refused, memory: needs"),
        "{skipped}"
    );
    assert!(skipped.contains("it is on pve2 already"), "{skipped}");
    let warnings = plan["warnings"].to_string();
    assert!(
        warnings.contains("guest 99999 is not in the zone"),
        "{warnings}"
    );

    // The config's default method may be a balance plugin too (the daemon's rounds use it).
    let (_dir3, default) = temp_file(
        "flxp.toml",
        &(text.clone() + "[balance]\nmethod = \"drain-fullest\"\n"),
    );
    let snap = snapshot();
    let (code, out, err) = run(&[
        "balance",
        "--from-file",
        &snap,
        "--config",
        default.to_str().unwrap(),
        "--json",
    ]);
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
    let licences = dir.path().join("licences.txt");
    std::fs::write(&licences, "pve1\npve2\n").unwrap();
    let extra = exec_plugin(
        "licences",
        "filter",
        "licence_filter.py",
        &[licences.to_str().unwrap()],
        "on-failure = \"fail\"",
    ) + &exec_plugin("drain-fullest", "balance", "balance_module.py", &["1"], "");
    let s = super::serve::start(Scenario::demo(), &extra, &[]).await;
    let v = s
        .gql(
            r#"query { placement(zone: "lab", request: { memory: "2GiB", cores: 1, tags: ["windows"] }, explain: true) {
                node warnings candidates { node feasible reasons scores { scorer score } } } }"#,
            json!({}),
        )
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

    let v = s.gql("query { balanceMethods { name } }", json!({})).await;
    assert!(v.to_string().contains("drain-fullest"), "{v}");
    let v = s
        .gql(
            r#"query { rebalancePlan(zone: "lab", method: "drain-fullest") { method summary migrations { vmid reason } } }"#,
            json!({}),
        )
        .await;
    assert_eq!(v["data"]["rebalancePlan"]["method"], "drain-fullest", "{v}");
}
