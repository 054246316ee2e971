# Shared by the scripts that check `flxp sim` against a Python client (proxmoxer, ProxLB): a venv
# under target/, the debug binary, and a simulator started on a free loopback port. Source it
# after `set -euo pipefail`; it sets `root`, `target_dir`, `venv`, `bin`, and, once `start_sim`
# returns, `pid`, `out` (its stdout file; stderr is `$out.log`), `url` and `host`.

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
pid=""
out=""

cleanup_sim() {
    if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    if [ -n "$out" ]; then rm -f "$out" "$out.log"; fi
    pid=""
    out=""
}
trap cleanup_sim EXIT

# venv_with NAME PACKAGE...: a venv at target/NAME-venv holding the packages; builds flxp.
venv_with() {
    venv="$target_dir/$1-venv"
    shift
    if [ ! -x "$venv/bin/python" ]; then
        python3 -m venv "$venv"
    fi
    "$venv/bin/pip" install --quiet --disable-pip-version-check "$@"
    cargo build --quiet -p flxp
    bin="$target_dir/debug/flxp"
}

# new_token ID: a fresh token for the simulator's `--token`, `ID=uuid` (ID is `user@realm!name`).
new_token() {
    echo "$1=$("$venv/bin/python" -c 'import uuid; print(uuid.uuid4())')"
}

# start_sim ARG...: `flxp sim ARG... --listen 127.0.0.1:0` in the background, waiting for its URL.
start_sim() {
    out="$(mktemp)"
    "$bin" sim "$@" --listen 127.0.0.1:0 >"$out" 2>"$out.log" &
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
}
