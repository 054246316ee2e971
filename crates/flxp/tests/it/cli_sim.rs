//! `flxp sim` as a user starts it.

use super::run;

#[test]
fn a_bad_token_is_refused_naming_the_expected_form() {
    for token in ["root@pam!1bad=s3cr3t", "root@pam=s3cr3t", "root@pam!flxp"] {
        let (code, _, err) = run(&["sim", "--scenario", "demo", "--token", token]);
        assert_eq!(code, 2, "{token}: {err}");
        assert!(err.contains("USER@REALM!TOKENID=SECRET"), "{token}: {err}");
        assert!(
            !err.contains("s3cr3t"),
            "{token}: the secret is never shown: {err}"
        );
    }
}

#[test]
fn sim_trace_writes_a_generated_trace_the_same_for_a_seed() {
    let args = [
        "sim",
        "trace",
        "office-hours",
        "--seed",
        "7",
        "--scenario",
        "demo",
        "--days",
        "2",
    ];
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{err}");
    let trace: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(trace["family"], "office-hours");
    assert_eq!(trace["seed"], 7);
    assert_eq!(trace["models"].as_object().map(|m| m.len()), Some(19));
    assert_eq!(run(&args).1, out, "deterministic");
    let other = run(&[
        "sim",
        "trace",
        "office-hours",
        "--seed",
        "8",
        "--scenario",
        "demo",
    ]);
    assert_ne!(other.1, out);

    let (code, _, err) = run(&["sim", "trace", "rush-hour", "--scenario", "demo"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("unknown trace family 'rush-hour'"), "{err}");
    assert!(err.contains("growth-churn"), "{err}");
}
