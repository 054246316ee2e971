//! `flxp serve`'s errors: each has its stable `extensions.code` and a message a user can act on;
//! a failed clone or start leaves nothing behind; secrets never show; the config is checked
//! against the live cluster at start.

use flxp_sim::Scenario;
use flxp_sim::scenario::{ErrorFault, FaultSpec};
use serde_json::{Value, json};

use super::serve::{API_TOKEN, CREATE, PASSWORD, code, create_vars, demo, message, options};
use super::serve_command::serve_command;

/// The `createVM` variables of a `bad_creates.json` case: a valid request with its changes.
fn bad_create(case: &Value) -> Value {
    let mut vars = create_vars("web");
    for key in ["zone", "name", "host"] {
        if let Some(v) = case.get(key) {
            vars[key] = v.clone();
        }
    }
    for (key, value) in case["options"].as_object().into_iter().flatten() {
        vars["options"][key] = value.clone();
    }
    vars
}

fn with(key: &str, value: Value) -> Value {
    let mut o = options();
    o[key] = value;
    o
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_request_has_its_code_and_creates_nothing() {
    let s = demo().await;
    let before = s.guest_count();
    // Each case changes a valid request (zone `lab`, name `web`, `options()`) in a few fields.
    let cases: Vec<Value> = serde_json::from_str(include_str!("bad_creates.json")).unwrap();
    for case in cases {
        let vars = bad_create(&case);
        let want_code = case["code"].as_str().unwrap();
        let want_message = case["message"].as_str().unwrap();
        let v = s.gql(CREATE, vars.clone()).await;
        assert!(v["data"].is_null(), "{vars}: {v}");
        assert_eq!(code(&v), want_code, "{vars}: {v}");
        assert!(
            message(&v).contains(want_message),
            "{vars}:\nwant {want_message}\ngot  {}",
            message(&v)
        );
        assert!(!message(&v).contains(PASSWORD));
    }
    // Zone names no zone has share one metrics label: clients cannot grow the series.
    let (_, metrics) = s.get("/metrics").await;
    assert!(!metrics.contains("zone=\"mars\""), "{metrics}");
    assert!(
        metrics.contains("flxp_create_vm_total{zone=\"(unknown)\",outcome=\"bad_input\"} 1"),
        "{metrics}"
    );
    // A malformed request is bad input too, and says what is wrong.
    let v = s.query("mutation { createVM(zone: \"lab\") { id } }").await;
    assert_eq!(code(&v), "BAD_INPUT", "{v}");
    assert!(message(&v).contains("name"), "{v}");
    // Placement questions with impossible numbers name the field (negative cores used to be
    // `Failed to parse "Int"`; 15 EiB used to be "no node fits").
    let placement = "query($r: PlacementInput!) { placement(zone: \"lab\", request: $r) { node } }";
    for (request, want) in [
        (
            // Whole counts from 1 up used to be the range; fractions such as 0.5 are vCPUs now.
            json!({ "memory": "1G", "cores": -1 }),
            "request.cores: -1 is not a vCPU count (a number above 0 and at most 1048576, such as 2 or 0.5)",
        ),
        (
            json!({ "memory": "1G", "cores": 0 }),
            "request.cores: 0 is not a vCPU count",
        ),
        (
            json!({ "memory": "1G", "cores": "abc" }),
            "Invalid value for argument \"request.cores\", expected type \"Float\"",
        ),
        (
            json!({ "memory": "1G", "cores": 4_294_967_296_i64 }),
            "request.cores: 4294967296 is not a vCPU count",
        ),
        (
            json!({ "memory": "15EiB", "cores": 1 }),
            "memory 17293822569102704640 bytes is more than 1.0 PiB",
        ),
    ] {
        let v = s.gql(placement, json!({ "r": request })).await;
        assert_eq!(code(&v), "BAD_INPUT", "{request}: {v}");
        assert!(message(&v).contains(want), "{request}: {v}");
    }
    assert_eq!(s.guest_count(), before);
    let (_, metrics) = s.get("/metrics").await;
    assert!(
        metrics.contains("flxp_create_vm_total{zone=\"lab\",outcome=\"no_capacity\"} 2"),
        "{metrics}"
    );
    // Refused requests are not logged as errors.
    assert!(!s.log().contains("ERROR"), "{}", s.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_wrong_token_is_401_unauthenticated() {
    let s = demo().await;
    for token in [None, Some("wrong-token"), Some("")] {
        let (status, v) = s.gql_as(token, "query { zones { name } }", json!({})).await;
        assert_eq!(status, 401, "{token:?}: {v}");
        assert_eq!(code(&v), "UNAUTHENTICATED");
        assert!(!v.to_string().contains("wrong-token"));
    }
    let (status, _) = s
        .gql_as(Some(API_TOKEN), "query { zones { name } }", json!({}))
        .await;
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_or_huge_bodies_get_a_graphql_error_with_bad_input() {
    let s = demo().await;
    let post = |body: Vec<u8>| {
        s.http
            .post(format!("{}/graphql", s.url))
            .bearer_auth(API_TOKEN)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    // Not JSON, invalid UTF-8 and a batch: each used to be a plain-text 400 from the extractor.
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"hello".to_vec(), "the request is not a GraphQL request: "),
        (
            b"{\"query\": \"{ nodes(zone: \\\"\xff\\\") { name } }\"}".to_vec(),
            "the request is not a GraphQL request: ",
        ),
        (
            br#"[{"query": "{ zones { name } }"}, {"query": "{ zones { name } }"}]"#.to_vec(),
            "the request is not a GraphQL request: Batch requests are not supported",
        ),
    ];
    for (body, want) in cases {
        let resp = post(body).await.unwrap();
        let status = resp.status().as_u16();
        let v: Value = resp.json().await.unwrap();
        assert_eq!(status, 400, "{v}");
        assert_eq!(code(&v), "BAD_INPUT", "{v}");
        assert!(message(&v).starts_with(want), "{v}");
    }
    // Bodies over 1 MiB used to be buffered whole, however big. Raw HTTP, so that the client
    // reads the early answer instead of failing on a body the server no longer reads.
    let addr = s.url.trim_start_matches("http://").to_owned();
    let declared = format!(
        "POST /graphql HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {API_TOKEN}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n",
        2 << 20
    );
    let chunk = 1 << 20 | 1;
    let mut chunked = format!(
        "POST /graphql HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {API_TOKEN}\r\n\
         content-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n{chunk:x}\r\n"
    )
    .into_bytes();
    chunked.extend(std::iter::repeat_n(b' ', chunk));
    chunked.extend(b"\r\n");
    for request in [declared.into_bytes(), chunked] {
        let answer = raw_http(&addr, &request).await;
        assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
        assert!(
            answer.contains(r#""message":"the request body is larger than 1.0 MiB""#)
                && answer.contains("BAD_INPUT"),
            "{answer}"
        );
    }
    let (status, v) = s
        .gql_as(Some(API_TOKEN), "query { zones { name } }", json!({}))
        .await;
    assert_eq!(
        (status, v["data"]["zones"][0]["name"].as_str()),
        (200, Some("lab"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deeply_nested_input_values_are_bad_input_and_the_server_stays_up() {
    let s = demo().await;
    let literal = "query { placement(zone: \"lab\", request: { memory: VALUE }) { node } }";
    let variable = "query($r: PlacementInput!) { placement(zone: \"lab\", request: $r) { node } }";
    // 800 levels overflowed a worker's stack and aborted the process; 3,000 do in a release build.
    for depth in [40, 800, 3000] {
        let list = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
        let object = format!("{}1{}", "{a:".repeat(depth), "}".repeat(depth));
        for value in [&list, &object] {
            let v = s.query(&literal.replace("VALUE", value)).await;
            assert_eq!(code(&v), "BAD_INPUT", "{depth}: {v}");
            assert_eq!(
                message(&v),
                "an input value nests lists or objects more than 32 levels deep",
                "{depth}"
            );
        }
        // As JSON variables: serde_json refuses past 128 levels, flxp past 32.
        let json_object = format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth));
        for value in [&list, &json_object] {
            let body = format!(
                r#"{{"query": {}, "variables": {{"r": {{"memory": {value}}}}}}}"#,
                Value::from(variable)
            );
            let resp = s
                .http
                .post(format!("{}/graphql", s.url))
                .bearer_auth(API_TOKEN)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap();
            let status = resp.status().as_u16();
            let v: Value = resp.json().await.unwrap();
            assert_eq!(code(&v), "BAD_INPUT", "{depth}: {v}");
            let want = if depth < 128 {
                (
                    200,
                    "variable $r nests lists or objects more than 32 levels deep",
                )
            } else {
                (400, "the request is not a GraphQL request: ")
            };
            assert_eq!(status, want.0, "{depth}: {v}");
            assert!(message(&v).starts_with(want.1), "{depth}: {v}");
        }
        let v = s.query("query { zones { name } }").await;
        assert_eq!(v["data"]["zones"][0]["name"], "lab", "{depth}: {v}");
    }
    // The useful depths still work.
    s.assert_placed(r#"{ memory: "1G", cores: 1, tags: ["flxp.anti-affinity.x"] }"#)
        .await;
}

/// Writes one raw HTTP request and reads the answer until the server closes or 2 s pass.
async fn raw_http(addr: &str, request: &[u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = std::time::Duration::from_secs(2);
    while let Ok(Ok(n)) = tokio::time::timeout(deadline, stream.read(&mut buf)).await {
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&buf[..n]);
        if answer.windows(4).any(|w| w == b"\r\n\r\n") && answer.ends_with(b"}") {
            break;
        }
    }
    String::from_utf8_lossy(&answer).into_owned()
}

async fn fail(s: &super::serve::Service, method: &str, path: &str) {
    s.sim.sim().world().faults.set(FaultSpec {
        errors: vec![ErrorFault {
            path: path.into(),
            method: Some(method.into()),
            rate: 1.0,
            status: 500,
            message: "simulated failure".into(),
        }],
        ..FaultSpec::default()
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_start_or_clone_leaves_nothing_behind() {
    let s = demo().await;
    let before = s.guest_count();
    fail(&s, "POST", "/nodes/*/qemu/*/status/start").await;
    let v = s.create("web-server").await;
    assert_eq!(code(&v), "PROXMOX_ERROR", "{v}");
    let m = message(&v);
    assert!(m.starts_with("starting the VM failed for VM "), "{m}");
    assert!(
        m.contains(" on pve4: ") && m.contains("simulated failure"),
        "{m}"
    );
    assert!(m.ends_with("the half-made VM was removed"), "{m}");
    s.wait_guests(before).await;

    fail(&s, "POST", "/nodes/*/qemu/9000/clone").await;
    let v = s.create("web-server").await;
    assert_eq!(code(&v), "PROXMOX_ERROR", "{v}");
    assert!(
        message(&v).starts_with("cloning the template failed"),
        "{v}"
    );
    s.wait_guests(before).await;
    // Failures are logged as errors with the reason, and never with the password.
    let log = s.log();
    assert!(
        log.contains("ERROR") && log.contains("starting the VM failed"),
        "{log}"
    );
    assert!(!log.contains(PASSWORD));
    // The room reserved for the failed creations is free again.
    let v = s
        .query("query { placement(zone: \"lab\", request: { computeProfile: \"medium\", tags: [\"flxp.anti-affinity.web\"] }) { node } }")
        .await;
    assert_eq!(v["data"]["placement"]["node"], "pve4", "{v}");
}

#[test]
fn the_config_is_checked_against_the_live_cluster_at_start() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let extra = "[storage-profiles.fast]\nstorage = \"nvme\"\ndisk = \"32GiB\"\n";
        let mut s = super::serve::start_unchecked(Scenario::demo(), extra).await;
        let status = s.child.wait().unwrap();
        assert_eq!(status.code(), Some(1));
        let log = s.log_with("exists in no zone").await;
        let config = s.config.display().to_string();
        assert!(
            log.contains(&format!("{config}:"))
                && log.contains(
                    ": storage-profiles.fast.storage: storage \"nvme\" exists in no zone (lab)"
                ),
            "{log}"
        );
    });
}

#[test]
fn a_config_without_api_tokens_is_refused() {
    let (_d, config) = super::temp_file(
        "flxp.toml",
        "[zones.lab]\nhosts = [\"127.0.0.1:1\"]\ntoken = \"root@pam!flxp\"\ntoken-secret = \"s\"\n",
    );
    let out = serve_command(&config)
        .env_remove("FLXP_API_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("no API token"), "{err}");
}

/// The `error: ` line of a command's stderr.
fn error_line(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    text.lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn config_check_refuses_every_config_serve_refuses_at_start_with_its_message() {
    const LONG: &str = "api-token-0123456789";
    let zone =
        "[zones.lab]\nhosts = [\"127.0.0.1:1\"]\ntoken = \"root@pam!flxp\"\ntoken-secret = \"s\"\n";
    // (config after the zone, FLXP_API_TOKEN, the error's end)
    let cases = [
        (
            "[api]\ntokens = [{ value = \"\" }]\n".to_owned(),
            Some(LONG),
            "api.tokens: tokens[0]: the token is empty",
        ),
        (
            "[api]\ntokens = [{ value = \"x\" }]\n".to_owned(),
            None,
            "api.tokens: tokens[0]: the token is shorter than 16 characters",
        ),
        (
            format!(
                "[api]\ntokens = [{{ value = \"{LONG}\", role = \"viewer\" }}, {{ value = \"{LONG}\" }}]\n"
            ),
            None,
            "api.tokens: tokens[1]: the same token as tokens[0]: list each token once, with one role",
        ),
        (
            format!("[api]\ntokens = [{{ value = \"{LONG}\", role = \"viewer\" }}]\n"),
            Some(LONG),
            "FLXP_API_TOKEN: the same token as api.tokens[0]: FLXP_API_TOKEN is an operator token, list each token once",
        ),
        (
            String::new(),
            Some("short"),
            "FLXP_API_TOKEN: the token is shorter than 16 characters",
        ),
        (
            "[api]\ntokens = [{ env = \"FLXP_TEST_UNSET_TOKEN_VAR\" }]\n".to_owned(),
            None,
            "api.tokens: tokens[0]: environment variable FLXP_TEST_UNSET_TOKEN_VAR is not set",
        ),
        (
            "[api]\ntokens = [{ file = \"/nonexistent/flxp-api.token\" }]\n".to_owned(),
            None,
            "api.tokens: tokens[0]: cannot read /nonexistent/flxp-api.token: ",
        ),
    ];
    for (extra, env, want) in cases {
        let (_d, config) = super::temp_file("flxp.toml", &format!("{zone}{extra}"));
        let with_env = |mut cmd: std::process::Command| {
            cmd.env_remove("FLXP_API_TOKEN").env_remove("FLXP_CONFIG");
            if let Some(t) = env {
                cmd.env("FLXP_API_TOKEN", t);
            }
            cmd.output().unwrap()
        };
        let served = with_env(serve_command(&config));
        let mut check = std::process::Command::new(env!("CARGO_BIN_EXE_flxp"));
        check.args(["config", "check", "--config", config.to_str().unwrap()]);
        let checked = with_env(check);
        let (serve_err, check_err) = (error_line(&served.stderr), error_line(&checked.stderr));
        assert_eq!(served.status.code(), Some(1), "{extra}: {serve_err}");
        assert_eq!(checked.status.code(), Some(1), "{extra}: {check_err}");
        assert!(serve_err.contains(want), "{extra}: {serve_err}");
        assert_eq!(check_err, serve_err, "{extra}");
        assert!(!serve_err.contains(LONG), "{serve_err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_reserve_for_a_node_of_no_zone_is_logged_once_at_start() {
    let s = super::serve::start(
        Scenario::demo(),
        "[placement]\nnode-reserve = { pve9 = \"1G\" }\n",
        &[],
    )
    .await;
    let want = "placement.node-reserve names node \"pve9\", which is not in zone lab (nodes: pve1, pve2, pve3, pve4)";
    let log = s.log_with(want).await;
    assert_eq!(log.matches(want).count(), 1, "{log}");
    assert!(log.contains(" WARN "), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_creation_without_room_wakes_a_node_flxp_switched_off() {
    let s = super::serve::start(Scenario::demo(), "[consolidate]\nenabled = true\n", &[]).await;
    let sim = s.sim.sim().clone();
    // As a consolidation leaves it: pve4 switched off, its power mark in pve1's notes.
    sim.world().node_power("pve4", "shutdown").unwrap();
    let start = std::time::Instant::now();
    while sim.world().nodes["pve4"].online && start.elapsed().as_secs() < 30 {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(!sim.world().nodes["pve4"].online);
    sim.world().nodes.get_mut("pve1").unwrap().notes =
        "<!-- flxp-power node=pve4 state=off since=1 -->".into();

    let vars =
        json!({ "zone": "lab", "name": "web", "options": with("computeProfile", json!("huge")) });
    let v = s.gql(CREATE, vars).await;
    assert_eq!(code(&v), "NO_CAPACITY", "{v}");
    // A round runs at once: Wake-on-LAN for pve4, which boots.
    let start = std::time::Instant::now();
    let woken = || {
        let w = sim.world();
        w.nodes["pve4"].online || w.nodes["pve4"].booting
    };
    while !woken() && start.elapsed().as_secs() < 30 {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(woken(), "pve4 woken: {}", s.stderr.lock().unwrap());
}
