//! A rebalancing method registered in a test shows up wherever methods are parsed or listed: the
//! registry, `--method` and its help, GraphQL's `balanceMethods`, and the GUIDE's docs check.

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
        assert!(help.contains(&format!("- {}:", m.name())), "{help}");
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
