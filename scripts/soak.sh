#!/usr/bin/env bash
# Soak test: flxp's daemon against `flxp sim` under chaos (API errors, latency, failing migrations,
# a node offline and back, maintenance on and off, kill -9 restarts), watched by an independent
# invariant checker (scripts/soak/soak.py, Python standard library only). See docs/soak.md.
#   bash scripts/soak.sh                                          # the long run: 1,000 migrations
#   bash scripts/soak.sh --migrations 150 --max-seconds 180 --seed 7   # the short run in .ci/run
# First the checker's self-test (each invariant broken by hand must be reported), then the soak.
# Exit code 1 on any violation; logs and the generated config stay in the printed work directory.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
cargo build --quiet -p flxp
bin="$target_dir/debug/flxp"

python3 "$root/scripts/soak/soak.py" --flxp "$bin" --self-test --seed 1
python3 "$root/scripts/soak/soak.py" --flxp "$bin" "$@"
