//! Cross-checks of the simulator's format checks against the regexes the schema file documents
//! (`supplements.formats`): the hand-written checks and the reference agree on a corpus.

use flxp_pve::types::Upid;
use flxp_sim::schema::{ApiSchema, Errors, Mode};
use flxp_sim::tasks::upid_text;
use regex::Regex;
use serde_json::{Value, json};

fn regex(name: &str) -> Regex {
    let s = ApiSchema::embedded().supplements();
    let pattern = s["formats"][name]["regex"].as_str().unwrap();
    let ci = s["formats"][name]["flags"].as_str() == Some("case-insensitive");
    Regex::new(&if ci {
        format!("(?i){pattern}")
    } else {
        pattern.to_string()
    })
    .unwrap()
}

fn accepted(format: &str, value: &str) -> bool {
    let schema = json!({"type": "string", "format": format});
    let mut errors = Errors::new();
    ApiSchema::embedded().validator(Mode::Perl).check_prop(
        Some(&Value::String(value.into())),
        &schema,
        "v",
        &mut errors,
    );
    errors.is_empty()
}

#[test]
fn tag_vmid_and_node_checks_agree_with_the_documented_regexes() {
    let corpus = [
        "a",
        "A",
        "9",
        "_",
        "-a",
        ".a",
        "a-b",
        "a+b",
        "a.b",
        "a_b",
        "a/b",
        "a=b",
        "a:b",
        "a,b",
        "a b",
        "a@b",
        "ä",
        "",
        "100",
        "99",
        "1000000000",
        "999999999",
        "0100",
        "pve1",
        "pve-1",
        "pve1-",
        "-pve",
        "PVE",
        "flxp.affinity.web",
        "flxp/affinity=web",
        "123",
        "1a",
    ];
    for (format, name) in [
        ("pve-tag", "pve-tag"),
        ("pve-vmid", "pve-vmid"),
        ("pve-node", "pve-node"),
    ] {
        let re = regex(name);
        for v in corpus {
            assert_eq!(accepted(format, v), re.is_match(v), "{format} {v:?}");
        }
    }
}

#[test]
fn produced_upids_match_the_documented_decode_regex() {
    let re = Regex::new(
        ApiSchema::embedded().supplements()["formats"]["UPID"]["decode_regex"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    let upid = upid_text(Upid::new(
        "pve-2",
        0x1F00,
        0x1_0000_0000,
        1_764_400_000,
        "qmigrate",
        "100",
        "root@pam!flxp",
    ));
    let caps = re.captures(&upid).unwrap_or_else(|| panic!("{upid}"));
    assert_eq!(&caps[1], "pve-2");
    assert_eq!(&caps[6], "qmigrate");
    assert_eq!(&caps[8], "root@pam!flxp");
    let short = upid_text(Upid::new("pve1", 1, 2, 3, "qmstart", "101", "root@pam"));
    assert!(re.is_match(&short), "{short}");
}
