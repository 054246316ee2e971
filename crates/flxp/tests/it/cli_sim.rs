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
