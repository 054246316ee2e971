#!/usr/bin/env bash
# Builds the .deb, inspects it (a stripped binary, man pages, units checked by
# `systemd-analyze verify`), publishes it in a signed apt repository (scripts/apt-repo.sh, a
# throwaway key) served on loopback, installs it from there as an admin would (keyring, a
# sources.list.d entry, `apt-get install flxp`), runs the installed flxp the way flxp.service
# does (as the flxp user, the unit's ExecStart) against a `flxp sim` on loopback, checks that it
# serves (/healthz, a GraphQL query), publishes a newer version and upgrades to it with
# `apt-get upgrade` over an edited config (kept), and purges it (secrets left to root alone).
# Needs root on Debian (CI runs it so).
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
command -v readelf >/dev/null || need+=(binutils)
command -v gpg >/dev/null || need+=(gpg)
command -v apt-ftparchive >/dev/null || need+=(apt-utils)
# systemd-analyze (Debian's systemd package) verifies the units.
command -v systemd-analyze >/dev/null || need+=(systemd)
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
    /usr/share/man/man1/flxp-daemon.1.gz /usr/share/man/man5/flxp.toml.5.gz \
    /usr/share/doc/flxp/GUIDE.md; do
    grep -qx "$f" <<<"$contents" || fail "the package lacks $f"
done
if grep -q "flxp-generate" <<<"$contents"; then fail "the hidden generate command has a man page"; fi
if grep -q "flxp-help" <<<"$contents"; then fail "a man page for the help subcommand"; fi
dpkg-deb -I "$deb" conffiles | grep -qx /etc/flxp/flxp.toml || fail "/etc/flxp/flxp.toml is not a conffile"
for s in postinst postrm; do dpkg-deb -I "$deb" "$s" >/dev/null || fail "no $s script"; done
echo "contents ok: binary, conffile, units, completions, man pages, docs"

pid=""; sim_pid=""; http_pid=""; work="$(mktemp -d)"
# apt's download sandbox (user _apt) must reach the lists directory below.
chmod 0711 "$work"
sources=/etc/apt/sources.list.d/flxp-check.list
keyring=/usr/share/keyrings/flxp-check-archive-keyring.gpg
cleanup() {
    for p in $pid $sim_pid $http_pid; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    [ -d "$work/gnupg" ] && gpgconf --kill gpg-agent 2>/dev/null
    rm -rf "$work"
    rm -f "$sources" "$keyring"
    if dpkg -s flxp >/dev/null 2>&1; then FLXP_PURGE_CONFIG=yes dpkg --purge flxp >/dev/null || true; fi
}
trap cleanup EXIT

# --- the binary carries no debug info (it goes into the -dbgsym package) ----------------------
dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/bin/flxp >"$work/flxp.bin"
# DWARF sections; `.debug_gdb_scripts` is not one (rustc's loaded section naming gdb's pretty-printers).
if readelf -S --wide "$work/flxp.bin" | grep -qE ' \.(z?debug_(info|line|str|abbrev|ranges|rnglists|loclists|aranges)|symtab) '; then
    fail "/usr/bin/flxp in the package carries debug info: $(readelf -S --wide "$work/flxp.bin" | grep -oE '\.(z?debug_[a-z_]*|symtab)' | tr '\n' ' ')"
fi
bin_bytes="$(stat -c %s "$work/flxp.bin")"
echo "stripped: /usr/bin/flxp $((bin_bytes / 1048576)) MiB, .deb $(($(stat -c %s "$deb") / 1048576)) MiB, installed size $(($(dpkg-deb -f "$deb" Installed-Size) / 1024)) MiB"

# --- a signed apt repository on loopback, as an admin's machine would use one -------------------
version="$(dpkg-deb -f "$deb" Version)"
export GNUPGHOME="$work/gnupg"
install -d -m 0700 "$GNUPGHOME"
gpg --batch --quiet --passphrase '' --quick-gen-key 'flxp check (throwaway) <check@flxp.invalid>' ed25519 sign 1d
bash "$root/scripts/apt-repo.sh" --key check@flxp.invalid --out "$work/repo" "$deb" >/dev/null
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
repo_port="$(free_port)"
python3 -m http.server --bind 127.0.0.1 --directory "$work/repo" "$repo_port" >"$work/http.log" 2>&1 &
http_pid=$!
for _ in $(seq 1 50); do curl -fsS "http://127.0.0.1:$repo_port/dists/stable/InRelease" >/dev/null 2>&1 && break; sleep 0.1; done
install -m 0644 "$work/repo/flxp-archive-keyring.gpg" "$keyring"
echo "deb [signed-by=$keyring] http://127.0.0.1:$repo_port stable main" >"$sources"
# Only this repository: the machine's own sources (and upgrades from them) are left alone.
mkdir -p "$work/lists/partial"
apt_only=(-o "Dir::Etc::SourceList=$sources" -o Dir::Etc::SourceParts=/nonexistent
    -o "Dir::State::Lists=$work/lists" -o APT::Get::List-Cleanup=false)
export DEBIAN_FRONTEND=noninteractive

# --- install ---------------------------------------------------------------------------------
apt-get "${apt_only[@]}" update </dev/null 2>&1 | tee "$work/apt-update.log"
grep -qiE 'NO_PUBKEY|not signed|BADSIG|EXPKEYSIG|signatures were invalid' "$work/apt-update.log" && fail "apt-get update did not trust the signed repository"
apt-get "${apt_only[@]}" install -y flxp </dev/null
[ "$(dpkg-query -W -f='${Version}' flxp)" = "$version" ] || fail "apt installed $(dpkg-query -W -f='${Version}' flxp), not $version"
getent passwd flxp >/dev/null || fail "no flxp user after install"
[ "$(stat -c '%U:%G %a' /etc/flxp/flxp.toml)" = "root:flxp 640" ] || fail "flxp.toml mode: $(stat -c '%U:%G %a' /etc/flxp/flxp.toml)"
/usr/bin/flxp --version | grep -Eq '^flxp [0-9.]+ \((unknown|[0-9a-f]{4,})\)$' || fail "--version: $(/usr/bin/flxp --version)"
man -w flxp-config-check >/dev/null 2>&1 || [ -f /usr/share/man/man1/flxp-config-check.1.gz ] || fail "man page not installed"
# Every page the man pages and the shipped config name is installed; no help page is named.
for page in /usr/share/man/man1/flxp*.1.gz /usr/share/man/man5/flxp.toml.5.gz; do
    for ref in $(zcat "$page" | sed 's/\\-/-/g' | grep -o 'flxp[a-z.-]*([15])' | sort -u); do
        n="${ref%(*}"; sec="${ref#*(}"; sec="${sec%)}"
        [ -f "/usr/share/man/man$sec/$n.$sec.gz" ] || fail "$page refers to $ref, which is not installed"
    done
    for s in 'EXIT STATUS' ENVIRONMENT FILES EXAMPLES; do
        case "$page" in *flxp.toml.5.gz) [ "$s" = EXAMPLES ] || continue ;; esac
        zcat "$page" | grep -q "^\.SH \"\{0,1\}$s" || fail "$page has no $s section"
    done
done
for f in $(grep -oE '/usr/share/doc/flxp/[A-Za-z.]*[A-Za-z]' /etc/flxp/flxp.toml); do
    [ -f "$f" ] || fail "the shipped config points to $f, which is not installed"
done

# Checks syntax, directives, that ExecStart's binary exists (now installed) and that every
# man: page the units name is installed (--man=yes).
man_check=no; command -v man >/dev/null && man_check=yes
systemd-analyze verify --man="$man_check" "$unit_dir/flxp.service" "$unit_dir/flxp-daemon.service" \
    || fail "systemd-analyze verify"
echo "systemd-analyze verify: ok"

# --- a simulated cluster and the admin's config ----------------------------------------------
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
# The unit's StateDirectory=flxp: systemd hands it to flxp as STATE_DIRECTORY (the audit log lives there).
state_dir="/var/lib/$(sed -n 's/^StateDirectory=//p' "$unit_dir/flxp.service")"
(cd /var/lib/flxp && STATE_DIRECTORY="$state_dir" exec setpriv --reuid="$user" --regid="$user" \
    --init-groups --no-new-privs -- "${argv[@]}") >"$work/serve.out" 2>"$work/serve.log" &
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

# --- upgrade from the repository keeps the edited config -------------------------------------
# The same package as a newer version, published as a release would be.
dpkg-deb -R "$deb" "$work/next"
sed -i "s/^Version: .*/Version: $version+1/" "$work/next/DEBIAN/control"
dpkg-deb --root-owner-group -b "$work/next" "$work/next.deb" >/dev/null
rm -rf "$work/next"
bash "$root/scripts/apt-repo.sh" --key check@flxp.invalid --out "$work/repo" "$work/next.deb" >/dev/null
apt-get "${apt_only[@]}" update </dev/null >/dev/null
apt-get "${apt_only[@]}" upgrade -y </dev/null | tee "$work/apt-upgrade.log"
[ "$(dpkg-query -W -f='${Version}' flxp)" = "$version+1" ] || fail "apt-get upgrade left flxp at $(dpkg-query -W -f='${Version}' flxp)"
grep -q "zones.lab" /etc/flxp/flxp.toml || fail "upgrading replaced the edited config"
[ "$(stat -c '%U:%G %a' /etc/flxp/flxp.toml)" = "root:flxp 640" ] || fail "flxp.toml mode after upgrade: $(stat -c '%U:%G %a' /etc/flxp/flxp.toml)"
echo "upgrade: apt-get upgrade to $version+1 kept the edited config"

# --- purge: secrets kept for root alone, never for a group id that can be reused --------------
dpkg --purge flxp 2>&1 | tee "$work/purge.log"
getent passwd flxp >/dev/null && fail "purge left the flxp user"
getent group flxp >/dev/null && fail "purge left the flxp group"
[ -e /var/lib/flxp ] && fail "purge left /var/lib/flxp"
[ -e /usr/bin/flxp ] && fail "purge left /usr/bin/flxp"
grep -q "zones.lab" /etc/flxp/flxp.toml.saved || fail "purge lost the edited config"
grep -q "kept in /etc/flxp, now readable by root only: api.token flxp.toml.saved lab.token" "$work/purge.log" \
    || fail "purge did not say what it kept"
exposed="$(find /etc/flxp \( -nogroup -o -nouser -o \! -user root -o \! -group root -o -perm /077 \) -printf '%p %u:%g %m\n')"
[ -z "$exposed" ] || fail "purge left files not root's alone: $exposed"
apt-get "${apt_only[@]}" install -y flxp </dev/null >/dev/null
FLXP_PURGE_CONFIG=yes dpkg --purge flxp
[ -e /etc/flxp ] && fail "FLXP_PURGE_CONFIG=yes left /etc/flxp"
kill "$sim_pid" 2>/dev/null || true; wait "$sim_pid" 2>/dev/null || true; sim_pid=""
echo "deb-check passed: built, inspected, published, installed and upgraded with apt, served and purged"
