//! Records the git commit flxp is built from (`flxp --version`): `FLXP_COMMIT` from the
//! environment (builds from a source tarball), else `git rev-parse --short HEAD`, else
//! "unknown". Never fails the build.

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (!text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-env-changed=FLXP_COMMIT");
    let commit = std::env::var("FLXP_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| git(&["rev-parse", "--short", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=FLXP_COMMIT={commit}");
    // Rebuild when HEAD moves: its file, its reflog (every commit), the packed refs.
    if let Some(dir) = git(&["rev-parse", "--git-dir"]).map(PathBuf::from) {
        for f in ["HEAD", "logs/HEAD"] {
            let p = dir.join(f);
            if p.exists() {
                println!("cargo:rerun-if-changed={}", p.display());
            }
        }
    } else {
        println!("cargo:rerun-if-changed=build.rs");
    }
}
