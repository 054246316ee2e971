#!/usr/bin/env bash
# Runs ProxLB 2.3 (PyPI `proxlb`, unmodified, as `python -m proxlb -c CONFIG`) against `flxp sim`:
# a dry run that must plan moves and change nothing, then a real run whose migrations (live VM
# migrations, a container restart migration, an HA-managed VM through `hamigrate`) must land.
# Creates a venv under target/, builds flxp, starts the simulator on a free port with
# crates/flxp-sim/tests/proxlb/scenario.json, runs crates/flxp-sim/tests/proxlb/check.py, and
# stops the simulator. PROXLB_VERSION picks another release (default 2.3.*).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
venv="$target_dir/proxlb-venv"
scenario="${SCENARIO:-$root/crates/flxp-sim/tests/proxlb/scenario.json}"
check="$root/crates/flxp-sim/tests/proxlb/check.py"

if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check "proxlb==${PROXLB_VERSION:-2.3.*}"

cargo build --quiet -p flxp
bin="$target_dir/debug/flxp"

token="root@pam!proxlb=$("$venv/bin/python" -c 'import uuid; print(uuid.uuid4())')"
pid=""
out="$(mktemp)"
cleanup() {
    if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    rm -f "$out" "$out.log"
}
trap cleanup EXIT

# A time scale makes the migrations (8 GiB at 1 GiB/s) and the HA manager's delay take well
# under a second each.
"$bin" sim --scenario "$scenario" --listen 127.0.0.1:0 --token "$token" --time-scale 20 \
    >"$out" 2>"$out.log" &
pid=$!
url=""
for _ in $(seq 1 100); do
    url="$(sed -n 's/^  base URL: *//p' "$out")"
    [ -n "$url" ] && break
    if ! kill -0 "$pid" 2>/dev/null; then
        echo "flxp sim exited early:" >&2; cat "$out.log" >&2; exit 1
    fi
    sleep 0.1
done
if [ -z "$url" ]; then echo "flxp sim did not start" >&2; cat "$out.log" >&2; exit 1; fi
host="${url#*://}"; host="${host%%/*}"
echo "### flxp sim: $url"
if ! "$venv/bin/python" "$check" --python "$venv/bin/python" --host "$host" --token "$token"; then
    echo "--- flxp sim log" >&2; tail -n 50 "$out.log" >&2
    exit 1
fi
echo "ProxLB check passed (dry run and real run, migrations landed)"
