#!/usr/bin/env bash
# Builds the Debian package into target/debian/: the release binary, then the shell completions
# and man pages generated from the command line and the config's definitions (`flxp generate`),
# then `cargo deb --no-build` (configured in crates/flxp/Cargo.toml): flxp_*.deb with a stripped
# binary, and flxp-dbgsym_*.ddeb with its debug info. Installs the pinned cargo-deb when it is missing.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
cargo_deb_version="3.8.0"

if ! cargo deb --version 2>/dev/null | grep -q "$cargo_deb_version"; then
    cargo install cargo-deb --locked --version "$cargo_deb_version"
fi
# dpkg-shlibdeps fills the package's library dependencies ($auto).
if ! command -v dpkg-shlibdeps >/dev/null && [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends dpkg-dev
fi

cargo build --release --locked -p flxp
assets="$target_dir/release/assets"
rm -rf "$assets"
"$target_dir/release/flxp" generate --out "$assets"
gzip -9n "$assets"/man/*.1 "$assets"/man/*.5
cargo deb -p flxp --no-build --output "$target_dir/debian/"
