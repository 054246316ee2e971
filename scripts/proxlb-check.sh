#!/usr/bin/env bash
# Runs ProxLB 2.3 (PyPI `proxlb`, unmodified, as `python -m proxlb -c CONFIG`) against `flxp sim`:
# a dry run that must plan moves and change nothing, then a real run whose migrations (live VM
# migrations, a container restart migration, an HA-managed VM through `hamigrate`) must land.
# Creates a venv under target/, builds flxp, starts the simulator on a free port with
# crates/flxp-sim/tests/proxlb/scenario.json, runs crates/flxp-sim/tests/proxlb/check.py, and
# stops the simulator. PROXLB_VERSION picks another release (default 2.3.*).
set -euo pipefail
. "$(dirname "$0")/sim-lib.sh"

scenario="${SCENARIO:-$root/crates/flxp-sim/tests/proxlb/scenario.json}"
check="$root/crates/flxp-sim/tests/proxlb/check.py"
venv_with proxlb "proxlb==${PROXLB_VERSION:-2.3.*}"
token="$(new_token 'root@pam!proxlb')"

# A time scale makes the migrations (8 GiB at 1 GiB/s) and the HA manager's delay take well
# under a second each.
start_sim --scenario "$scenario" --token "$token" --time-scale 20
echo "### flxp sim: $url"
if ! "$venv/bin/python" "$check" --python "$venv/bin/python" --host "$host" --token "$token"; then
    echo "--- flxp sim log" >&2; tail -n 50 "$out.log" >&2
    exit 1
fi
echo "ProxLB check passed (dry run and real run, migrations landed)"
