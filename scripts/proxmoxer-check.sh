#!/usr/bin/env bash
# Checks `flxp sim` against Python's proxmoxer, as community tools use it: once over plain HTTP
# and once over HTTPS with verify_ssl=False, each with token and password auth.
# Creates a venv under target/, builds flxp, starts the simulator from a scenario fixture on a
# free port, runs crates/flxp-sim/tests/proxmoxer/check.py, and stops the simulator.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
venv="$target_dir/proxmoxer-venv"
scenario="${SCENARIO:-$root/crates/flxp-sim/scenarios/small.json}"
check="$root/crates/flxp-sim/tests/proxmoxer/check.py"

if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check proxmoxer requests

cargo build --quiet -p flxp
bin="$target_dir/debug/flxp"

token="root@pam!check=$("$venv/bin/python" -c 'import uuid; print(uuid.uuid4())')"
pid=""
out=""
cleanup() {
    if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    if [ -n "$out" ]; then rm -f "$out"; fi
}
trap cleanup EXIT

run() {
    local label="$1"; shift
    out="$(mktemp)"
    # A time scale makes a multi-GiB live migration take a fraction of a second.
    "$bin" sim --scenario "$scenario" --listen 127.0.0.1:0 --token "$token" --time-scale 50 "$@" \
        >"$out" 2>"$out.log" &
    pid=$!
    local url=""
    for _ in $(seq 1 100); do
        url="$(sed -n 's/^  base URL: *//p' "$out")"
        [ -n "$url" ] && break
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "flxp sim exited early:" >&2; cat "$out.log" >&2; exit 1
        fi
        sleep 0.1
    done
    if [ -z "$url" ]; then echo "flxp sim did not start" >&2; cat "$out.log" >&2; exit 1; fi
    local host="${url#*://}"; host="${host%%/*}"
    echo "### $label: $url"
    local flags=()
    if [ "$label" = http ]; then flags=(--http); fi
    "$venv/bin/python" "$check" --host "$host" --token "$token" \
        --user root@pam --password secret "${flags[@]}"
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
    rm -f "$out" "$out.log"; out=""
}

run http --http
run https
echo "proxmoxer check passed (http and https, token and password auth)"
