//! A rebalancing method registered in a test shows up wherever methods are parsed or listed: the
//! registry, `--method` and its help, GraphQL's `balanceMethods`, and the GUIDE's docs check; and
//! a GraphQL server built with that registry, running in this process, lists it and plans with it.

// Tests may panic: unwrapping is how they fail.
#![allow(clippy::unwrap_used)]

use std::sync::LazyLock;

use clap::Parser;
use flxp_core::balance::{BalanceMethod, BalanceOptions, MethodName, Plan, PlanInput, Registry};

use super::Cli;
use super::balance::MethodArg;
use crate::serve::schema::{BalanceMethodInfo, method_name};

#[path = "../../tests/it/docs_check.rs"]
mod docs_check;

/// A method only this test registers: flxp's planner without swaps.
struct Gentle;

impl BalanceMethod for Gentle {
    fn name(&self) -> &'static str {
        "gentle"
    }

    fn description(&self) -> &'static str {
        "a test method: flxp without swaps"
    }

    fn plan(&self, input: &PlanInput<'_>, options: &BalanceOptions) -> flxp_core::Result<Plan> {
        let fixes_only = BalanceOptions {
            method: MethodName::default(),
            swaps: false,
            ..options.clone()
        };
        Registry::builtin().plan(input, &fixes_only)
    }
}

static GENTLE: Gentle = Gentle;
static REGISTRY: LazyLock<Registry> = LazyLock::new(|| Registry::builtin().with(&GENTLE).unwrap());

#[test]
fn a_registered_method_is_parsed_listed_and_its_docs_demanded() {
    let registry: &'static Registry = &REGISTRY;
    assert_eq!(registry.parse("gentle").unwrap().as_str(), "gentle");
    assert!(Registry::builtin().parse("gentle").is_err());

    // The binary's own command line (`Cli::try_parse_with`), built from the registry at run time:
    // `--method` parses against it, and `--help` lists it.
    let args = [
        "flxp",
        "balance",
        "--from-file",
        "s.json",
        "--method",
        "gentle",
    ];
    let method = |cli: Cli| match cli.command {
        super::Command::Balance(a) => a.method,
        _ => None,
    };
    assert_eq!(
        method(Cli::try_parse_with(registry, args).unwrap()),
        Some(MethodArg::Registered(registry.parse("gentle").unwrap()))
    );
    let help = Cli::command_with(registry)
        .find_subcommand_mut("balance")
        .unwrap()
        .render_long_help()
        .to_string();
    assert!(help.contains("- gentle:"), "{help}");
    assert!(help.contains("a test method: flxp without swaps"), "{help}");
    // The built-in command line takes any name: it is checked once the config is read, whose
    // balance plugins are methods too (`flxp balance` then refuses an unknown one, exit 2).
    assert_eq!(
        method(Cli::try_parse_with(Registry::builtin(), args).unwrap()),
        Some(MethodArg::Other("gentle".into()))
    );
    let help = Cli::command_with(Registry::builtin())
        .find_subcommand_mut("balance")
        .unwrap()
        .render_long_help()
        .to_string();
    for m in Registry::builtin().iter() {
        assert!(help.contains(&format!("- {}:", m.as_str())), "{help}");
    }
    assert!(!help.contains("gentle"), "{help}");

    // GraphQL's `method` arguments take what the registry holds, and `balanceMethods` lists it.
    assert_eq!(method_name("gentle", registry).unwrap().as_str(), "gentle");
    let e = method_name("gentle", Registry::builtin()).unwrap_err();
    assert!(
        e.message
            .contains("known: flxp, pve-bruteforce, pve-topsis"),
        "{}",
        e.message
    );
    let listed = BalanceMethodInfo::all(registry);
    assert_eq!(
        listed.last(),
        Some(&BalanceMethodInfo {
            name: "gentle".into(),
            description: "a test method: flxp without swaps".into(),
        })
    );

    // The GUIDE's docs check passes for the built-in methods and demands the new one.
    let guide = include_str!("../../../../GUIDE.md");
    assert!(docs_check::undocumented_methods(guide, Registry::builtin()).is_empty());
    assert_eq!(
        docs_check::undocumented_methods(guide, registry),
        vec!["gentle"]
    );
}

#[test]
fn a_config_may_name_a_method_of_the_registry_it_is_read_with() {
    let text = "[balance]\nmethod = \"gentle\"\n";
    let path = std::path::Path::new("flxp.toml");
    let config = crate::config::Config::parse_with(text, path, &REGISTRY).unwrap();
    assert_eq!(config.balance.method, "gentle");
    assert_eq!(
        config.balance.method.description(),
        "a test method: flxp without swaps"
    );
    let e = crate::config::Config::parse(text, path).unwrap_err();
    assert_eq!(e.key, "balance.method");
    assert_eq!(
        e.message,
        r#"unknown balancing method "gentle" (known: flxp, pve-bruteforce, pve-topsis)"#
    );
}

/// A running `flxp serve` built with a registry ([`crate::serve::state_with_methods`]), on a free
/// loopback port over the in-process simulator of the embedded zone `sim`.
struct Served {
    url: String,
    server: tokio::task::JoinHandle<()>,
}

const TOKEN: &str = "methods-test-token";

impl Served {
    async fn start(config: &crate::config::Config, methods: &Registry) -> Self {
        let tokens = crate::serve::state::Tokens::new([TOKEN]);
        let state = crate::serve::state_with_methods(config, tokens, methods).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let router = crate::serve::http::router(state);
        let server = tokio::spawn(async move {
            axum::serve(listener, router).await.unwrap();
        });
        Self { url, server }
    }

    async fn query(&self, query: &str) -> serde_json::Value {
        let response = reqwest::Client::new()
            .post(format!("{}/graphql", self.url))
            .bearer_auth(TOKEN)
            .json(&serde_json::json!({ "query": query }))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        response.json().await.unwrap()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.server.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registered_method_reaches_a_running_graphql_server() {
    let sim = crate::serve::embedded::start().await.unwrap();
    let zone = crate::serve::embedded::ZONE;
    let plan = format!(r#"{{ rebalancePlan(zone: "{zone}", method: "gentle") {{ method }} }}"#);

    let served = Served::start(&sim.config, &REGISTRY).await;
    let v = served
        .query("{ balanceMethods { name description } }")
        .await;
    let listed = v["data"]["balanceMethods"].as_array().unwrap();
    assert_eq!(
        listed.last().unwrap(),
        &serde_json::json!({ "name": "gentle", "description": "a test method: flxp without swaps" }),
        "{v}"
    );
    assert_eq!(listed.len(), Registry::builtin().iter().count() + 1, "{v}");
    let v = served.query(&plan).await;
    assert_eq!(v["data"]["rebalancePlan"]["method"], "gentle", "{v}");
    drop(served);

    // Built with the built-in registry, the same server lists no `gentle` and refuses it.
    let served = Served::start(&sim.config, Registry::builtin()).await;
    let v = served.query("{ balanceMethods { name } }").await;
    let names: Vec<&str> = v["data"]["balanceMethods"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["name"].as_str())
        .collect();
    assert_eq!(names, ["flxp", "pve-bruteforce", "pve-topsis"], "{v}");
    let v = served.query(&plan).await;
    assert_eq!(v["errors"][0]["extensions"]["code"], "BAD_INPUT", "{v}");
    let message = v["errors"][0]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(
            r#"unknown balancing method "gentle" (known: flxp, pve-bruteforce, pve-topsis)"#
        ),
        "{v}"
    );
    drop(served);
    sim.handle.shutdown().await.ok();
}

/// `--wake-timeout` only means something with `--wake`: alone it is refused, not ignored.
#[test]
fn wake_timeout_needs_wake() {
    let alone = [
        "flxp",
        "consolidate",
        "--from-file",
        "s.json",
        "--wake-timeout",
        "5",
    ];
    let e = Cli::try_parse_from(alone).err().unwrap();
    assert_eq!(e.kind(), clap::error::ErrorKind::MissingRequiredArgument);
    assert!(e.to_string().contains("--wake <NODE>"), "{e}");
    let with = [
        "flxp",
        "consolidate",
        "--zone",
        "lab",
        "--wake",
        "n1",
        "--wake-timeout",
        "5",
    ];
    assert!(Cli::try_parse_from(with).is_ok());
    assert!(Cli::try_parse_from(["flxp", "consolidate", "--zone", "lab"]).is_ok());
}

/// The command line parsed, as its `Debug` shows it (the subcommands' fields are private).
fn parsed(args: &[&str]) -> String {
    format!("{:?}", Cli::try_parse_from(args).unwrap())
}

#[test]
fn config_zone_and_json_go_before_or_after_the_command() {
    // `flxp --config F evacuate NODE` was refused: `--config` was the subcommand's alone.
    let orders: [&[&str]; 3] = [
        &[
            "flxp", "--config", "f.toml", "--zone", "lab", "--json", "evacuate", "pve1",
        ],
        &[
            "flxp", "evacuate", "pve1", "--config", "f.toml", "--zone", "lab", "--json",
        ],
        &[
            "flxp",
            "--json",
            "evacuate",
            "--zone",
            "lab",
            "pve1",
            "--config=f.toml",
        ],
    ];
    for args in orders {
        let cli = Cli::try_parse_from(args).unwrap();
        let super::Command::Evacuate(a) = &cli.command else {
            panic!("{args:?}: {cli:?}");
        };
        let source = &a.run.source;
        assert_eq!(
            source.config.as_deref(),
            Some("f.toml".as_ref()),
            "{args:?}"
        );
        assert_eq!(source.zone.as_deref(), Some("lab"), "{args:?}");
        assert!(a.run.json && cli.wants_json(), "{args:?}");
        assert_eq!(cli.refuse_unused_globals().map_err(|e| e.0), Ok(()));
    }
    // A required `--zone` given before the command, and commands one level further down: the
    // subcommand's own option holds the value.
    for (args, want) in [
        (
            &[
                "flxp",
                "--zone",
                "lab",
                "--config",
                "f.toml",
                "maintenance",
                "pve1",
            ][..],
            r#"Maintenance(Args { node: "pve1", zone: Some("lab"), off: false, stay: false, config: Some("f.toml")"#,
        ),
        (
            &["flxp", "--config", "f.toml", "daemon"][..],
            r#"Daemon(Args { config: Some("f.toml") })"#,
        ),
        (
            &["flxp", "--config", "f.toml", "config", "check"][..],
            r#"Check(CheckArgs { config: Some("f.toml") })"#,
        ),
        (
            &["flxp", "config", "--config", "f.toml", "check"][..],
            r#"Check(CheckArgs { config: Some("f.toml") })"#,
        ),
    ] {
        let got = parsed(args);
        assert!(got.contains(want), "{args:?}: {got}");
    }
    // `--zone` is still needed where it was required.
    assert_eq!(
        super::required_zone(None, "maintenance").map_err(|e| e.0),
        Err("`flxp maintenance` needs --zone Z: a zone of the config file".to_owned())
    );
    // A command without a use for one refuses it, on either side.
    for (args, flag) in [
        (
            &["flxp", "--config", "f.toml", "sim"][..],
            "`flxp sim` takes no --config",
        ),
        (
            &["flxp", "sim", "--zone", "lab"][..],
            "`flxp sim` takes no --zone",
        ),
        (
            &["flxp", "daemon", "--json"][..],
            "`flxp daemon` takes no --json",
        ),
        (
            &["flxp", "--zone", "lab", "balance", "--from-file", "s.json"][..],
            "--from-file and --zone both name the cluster: give one",
        ),
    ] {
        let cli = Cli::try_parse_from(args).unwrap();
        assert_eq!(
            cli.refuse_unused_globals().map_err(|e| e.0),
            Err(flag.to_owned())
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_thousand_aliases_come_back_in_the_order_asked() {
    // Each alias reads the zone: past tokio's budget some wait, and async-graphql answered them
    // in the order they finished.
    let sim = crate::serve::embedded::start().await.unwrap();
    let zone = crate::serve::embedded::ZONE;
    let served = Served::start(&sim.config, Registry::builtin()).await;
    let fields: Vec<String> = (0..3000)
        .map(|i| format!(r#"n{i}: nodes(zone: "{zone}") {{ name }}"#))
        .collect();
    let response = reqwest::Client::new()
        .post(format!("{}/graphql", served.url))
        .bearer_auth(TOKEN)
        .json(&serde_json::json!({ "query": format!("{{ {} }}", fields.join(" ")) }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    // serde_json's map sorts keys: the order is read from the text.
    let text = response.text().await.unwrap();
    let at: Vec<usize> = (0..3000)
        .map(|i| text.find(&format!(r#""n{i}":"#)).unwrap())
        .collect();
    let first_out_of_order = at.windows(2).position(|w| w[0] > w[1]);
    assert_eq!(first_out_of_order, None, "{}", &text[..text.len().min(500)]);
    drop(served);
    sim.handle.shutdown().await.ok();
}
