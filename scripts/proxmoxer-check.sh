#!/usr/bin/env bash
# Checks `flxp sim` against Python's proxmoxer, as community tools use it: once over plain HTTP
# and once over HTTPS with verify_ssl=False, each with token and password auth.
# Creates a venv under target/, builds flxp, starts the simulator from a scenario fixture on a
# free port, runs crates/flxp-sim/tests/proxmoxer/check.py, and stops the simulator.
set -euo pipefail
. "$(dirname "$0")/sim-lib.sh"

scenario="${SCENARIO:-$root/crates/flxp-sim/scenarios/small.json}"
check="$root/crates/flxp-sim/tests/proxmoxer/check.py"
venv_with proxmoxer proxmoxer requests
token="$(new_token 'root@pam!check')"

run() {
    local label="$1"; shift
    # A time scale makes a multi-GiB live migration take a fraction of a second.
    start_sim --scenario "$scenario" --token "$token" --time-scale 50 "$@"
    echo "### $label: $url"
    local flags=()
    if [ "$label" = http ]; then flags=(--http); fi
    "$venv/bin/python" "$check" --host "$host" --token "$token" \
        --user root@pam --password secret "${flags[@]}"
    cleanup_sim
}

run http --http
run https
echo "proxmoxer check passed (http and https, token and password auth)"
