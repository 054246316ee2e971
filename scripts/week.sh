#!/usr/bin/env bash
# A week in motion: runs simulated days of a load trace against one contender (or several, one
# after the other) and prints the simulator's measures side by side. See GUIDE.md, "A week in
# motion", and scripts/week/week.py for what is measured and how.
#
#   scripts/week.sh --trace office-hours --seed 7 --days 7 --contender flxp
#   scripts/week.sh --trace night-batch --seed 3 --days 2 --contender all --out target/week
#
# --contender: flxp, pve-topsis, pve-bruteforce, proxlb, proxlb-cpsat, or all (every one, then a
# table of all). ProxLB 2.3 (PyPI `proxlb`, with `proxlb-solver` for proxlb-cpsat) is installed
# into a venv under target/ when a ProxLB contender runs. PROFILE=debug uses the debug build (CI);
# the default is the release build. Other flags go to week.py unchanged.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
profile="${PROFILE:-release}"

contenders=(flxp)
out=""
pass=()
while [ $# -gt 0 ]; do
    case "$1" in
        --contender)
            if [ "$2" = all ]; then contenders=(flxp pve-topsis proxlb proxlb-cpsat); else contenders=("$2"); fi
            shift 2 ;;
        --out) out="$2"; shift 2 ;;
        *) pass+=("$1"); shift ;;
    esac
done

if [ "$profile" = release ]; then
    cargo build --quiet --release -p flxp
else
    cargo build --quiet -p flxp
fi
bin="$target_dir/$profile/flxp"

python=python3
for c in "${contenders[@]}"; do
    case "$c" in
        proxlb*)
            venv="$target_dir/proxlb-venv"
            [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
            "$venv/bin/pip" install --quiet --disable-pip-version-check "proxlb==${PROXLB_VERSION:-2.3.*}" proxlb-solver
            python="$venv/bin/python" ;;
    esac
done

out="${out:-$(mktemp -d)}"
mkdir -p "$out"
results=()
status=0
for c in "${contenders[@]}"; do
    json="$out/$c.json"
    echo "### $c" >&2
    python3 "$root/scripts/week/week.py" --flxp "$bin" --python "$python" \
        --scenario "${SCENARIO:-$root/scripts/week/scenario.json}" \
        --contender "$c" --json "$json" --workdir "$out/$c" "${pass[@]}" || status=$?
    [ -f "$json" ] && results+=("$json")
done
if [ "${#results[@]}" -gt 1 ]; then
    python3 "$root/scripts/week/week.py" --flxp "$bin" --compare "${results[@]}"
fi
echo "results in $out" >&2
exit "$status"
