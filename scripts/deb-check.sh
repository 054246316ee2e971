#!/usr/bin/env bash
# Builds the .deb, inspects it, installs it with dpkg, runs the installed flxp the way
# flxp.service does (as the flxp user, the unit's ExecStart) against a `flxp sim` on loopback,
# checks that it serves (/healthz, a GraphQL query), reinstalls it over an edited config
# (an upgrade keeps the conffile), and purges it. Needs root on Debian (CI runs it so).
# Usage: scripts/deb-check.sh [PACKAGE.deb]   (without one, scripts/deb-build.sh builds it)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
unit_dir=/usr/lib/systemd/system

if [ "$(id -u)" != 0 ] || ! command -v dpkg >/dev/null; then
    echo "deb-check: skipped (needs root on Debian)"
    exit 0
fi
if dpkg -s flxp >/dev/null 2>&1; then
    echo "deb-check: a flxp package is already installed here; refusing to replace it" >&2
    exit 1
fi

need=()
command -v curl >/dev/null || need+=(curl)
command -v python3 >/dev/null || need+=(python3)
if [ ${#need[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

if [ $# -ge 1 ]; then
    deb="$1"
else
    bash "$root/scripts/deb-build.sh"
    deb="$(ls -t "$target_dir"/debian/flxp_*.deb | head -n1)"
fi
echo "### package: $deb"

fail() { echo "deb-check: FAILED: $*" >&2; exit 1; }

# --- contents --------------------------------------------------------------------------------
contents="$(dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|')"
for f in /usr/bin/flxp /etc/flxp/flxp.toml \
    /usr/lib/systemd/system/flxp.service /usr/lib/systemd/system/flxp-daemon.service \
    /usr/share/bash-completion/completions/flxp /usr/share/zsh/vendor-completions/_flxp \
    /usr/share/fish/vendor_completions.d/flxp.fish \
    /usr/share/man/man1/flxp.1.gz /usr/share/man/man1/flxp-serve.1.gz \
    /usr/share/man/man1/flxp-config-check.1.gz /usr/share/man/man1/flxp-setup-token.1.gz \
    /usr/share/doc/flxp/GUIDE.md; do
    grep -qx "$f" <<<"$contents" || fail "the package lacks $f"
done
if grep -q "flxp-generate" <<<"$contents"; then fail "the hidden generate command has a man page"; fi
dpkg-deb -I "$deb" conffiles | grep -qx /etc/flxp/flxp.toml || fail "/etc/flxp/flxp.toml is not a conffile"
for s in postinst postrm; do dpkg-deb -I "$deb" "$s" >/dev/null || fail "no $s script"; done
echo "contents ok: binary, conffile, units, completions, man pages, docs"

pid=""; sim_pid=""; work="$(mktemp -d)"
cleanup() {
    for p in $pid $sim_pid; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    rm -rf "$work"
    if dpkg -s flxp >/dev/null 2>&1; then FLXP_PURGE_CONFIG=yes dpkg --purge flxp >/dev/null || true; fi
}
trap cleanup EXIT

# --- install ---------------------------------------------------------------------------------
dpkg -i "$deb"
getent passwd flxp >/dev/null || fail "no flxp user after install"
[ "$(stat -c '%U:%G %a' /etc/flxp/flxp.toml)" = "root:flxp 640" ] || fail "flxp.toml mode: $(stat -c '%U:%G %a' /etc/flxp/flxp.toml)"
/usr/bin/flxp --version | grep -Eq '^flxp [0-9.]+ \((unknown|[0-9a-f]{4,})\)$' || fail "--version: $(/usr/bin/flxp --version)"
man -w flxp-config-check >/dev/null 2>&1 || [ -f /usr/share/man/man1/flxp-config-check.1.gz ] || fail "man page not installed"

if command -v systemd-analyze >/dev/null; then
    # Checks syntax, directives and that ExecStart's binary exists (now installed).
    systemd-analyze verify --man=no "$unit_dir/flxp.service" "$unit_dir/flxp-daemon.service" \
        || fail "systemd-analyze verify"
    echo "systemd-analyze verify: ok"
else
    echo "systemd-analyze verify: skipped (systemd-analyze is not installed here)"
fi

# --- a simulated cluster and the admin's config ----------------------------------------------
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
sim_port="$(free_port)"; api_port="$(free_port)"
secret="$(cat /proc/sys/kernel/random/uuid)"
/usr/bin/flxp sim --scenario demo --http --listen "127.0.0.1:$sim_port" --time-scale 50 \
    --token "flxp@pve!flxp=$secret" >"$work/sim.out" 2>"$work/sim.log" &
sim_pid=$!
for _ in $(seq 1 100); do grep -q "base URL" "$work/sim.out" 2>/dev/null && break; sleep 0.1; done
grep -q "base URL" "$work/sim.out" || { cat "$work/sim.log" >&2; fail "flxp sim did not start"; }

install -m 0640 -g flxp /dev/null /etc/flxp/lab.token
echo "$secret" >/etc/flxp/lab.token
api_token="$(cat /proc/sys/kernel/random/uuid)"
install -m 0640 -g flxp /dev/null /etc/flxp/api.token
echo "$api_token" >/etc/flxp/api.token
cat >>/etc/flxp/flxp.toml <<TOML

[zones.lab]
hosts = ["http://127.0.0.1:$sim_port"]
token = "flxp@pve!flxp"
token-secret-file = "/etc/flxp/lab.token"

[api]
listen = "127.0.0.1:$api_port"
tokens = [{ file = "/etc/flxp/api.token" }]
TOML

runuser -u flxp -- /usr/bin/flxp config check || fail "flxp config check as the flxp user"

# --- run as the unit does ------------------------------------------------------------------
exec_start="$(sed -n 's/^ExecStart=//p' "$unit_dir/flxp.service")"
user="$(sed -n 's/^User=//p' "$unit_dir/flxp.service")"
[ "$user" = flxp ] || fail "the unit runs as '$user'"
read -r -a argv <<<"$exec_start"
# setpriv execs flxp itself (no wrapper process in between), so SIGTERM reaches it as from systemd.
(cd /var/lib/flxp && exec setpriv --reuid="$user" --regid="$user" --init-groups --no-new-privs \
    -- "${argv[@]}") >"$work/serve.out" 2>"$work/serve.log" &
pid=$!
for _ in $(seq 1 150); do
    curl -fsS "http://127.0.0.1:$api_port/healthz" >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || { cat "$work/serve.log" >&2; fail "flxp serve exited"; }
    sleep 0.2
done
curl -fsS "http://127.0.0.1:$api_port/healthz" >/dev/null || { cat "$work/serve.log" >&2; fail "/healthz"; }
answer="$(curl -fsS -H "Authorization: Bearer $api_token" -H 'Content-Type: application/json' \
    -d '{"query":"{ zones { name reachable } nodes(zone: \"lab\") { name } }"}' \
    "http://127.0.0.1:$api_port/graphql")"
grep -q '"name":"lab"' <<<"$answer" || fail "GraphQL answer: $answer"
grep -q '"errors"' <<<"$answer" && fail "GraphQL errors: $answer"
echo "serving: /healthz and GraphQL ok"
kill -TERM "$pid"
wait "$pid" || { cat "$work/serve.log" >&2; fail "flxp serve did not stop cleanly on SIGTERM"; }
grep -q "stopped" "$work/serve.log" || fail "flxp serve did not log its graceful stop"
pid=""

# --- upgrade (reinstall) keeps the edited config; purge keeps it aside ----------------------
dpkg -i "$deb"
grep -q "zones.lab" /etc/flxp/flxp.toml || fail "reinstalling replaced the edited config"
dpkg --purge flxp
getent passwd flxp >/dev/null && fail "purge left the flxp user"
[ -e /var/lib/flxp ] && fail "purge left /var/lib/flxp"
[ -e /usr/bin/flxp ] && fail "purge left /usr/bin/flxp"
grep -q "zones.lab" /etc/flxp/flxp.toml.saved || fail "purge lost the edited config"
dpkg -i "$deb" >/dev/null
FLXP_PURGE_CONFIG=yes dpkg --purge flxp
[ -e /etc/flxp ] && fail "FLXP_PURGE_CONFIG=yes left /etc/flxp"
kill "$sim_pid" 2>/dev/null || true; wait "$sim_pid" 2>/dev/null || true; sim_pid=""
echo "deb-check passed: built, inspected, installed, served, upgraded and purged"
