#!/usr/bin/env bash
# Builds a signed apt repository (suite `stable`, component `main`) from flxp packages, for
# machines to install and upgrade flxp with `apt`: the packages go into DIR/pool/main/, the
# indices into DIR/dists/stable/ (Packages, Packages.gz, Release, InRelease, Release.gpg), and
# the public key clients need into DIR/flxp-archive-keyring.gpg. Run it again with a newer .deb
# to publish an upgrade: the pool keeps the older versions and the indices list them all.
# Serve DIR over HTTP(S) with any web server. Uses apt-ftparchive (apt-utils) and gpg, and
# installs them when missing and run as root.
#
# Usage: scripts/apt-repo.sh --key KEY [--gnupghome DIR] --out REPO PACKAGE.deb...
#   --key KEY         the OpenPGP key to sign with (fingerprint, key ID or user ID), secret part in
#                     gpg's keyring; it must be usable without a passphrase prompt (gpg-agent, or
#                     a key made for signing in batch)
#   --gnupghome DIR   the keyring holding it (else GNUPGHOME, else ~/.gnupg)
#   --out REPO        the repository directory (created; existing packages in its pool are kept)
set -euo pipefail

usage() {
    sed -n 's/^# \{0,1\}//; /^Usage:/,/^$/p' "$0" | sed '/^$/d' >&2
    exit 2
}

key=""; out=""; debs=()
while [ $# -gt 0 ]; do
    case "$1" in
    --key) key="${2:-}"; shift 2 ;;
    --gnupghome) export GNUPGHOME="${2:-}"; shift 2 ;;
    --out) out="${2:-}"; shift 2 ;;
    -h | --help) usage ;;
    -*) echo "apt-repo: unknown option $1" >&2; usage ;;
    *) debs+=("$1"); shift ;;
    esac
done
[ -n "$key" ] || { echo "apt-repo: --key is required (the signing key)" >&2; usage; }
[ -n "$out" ] || { echo "apt-repo: --out is required (the repository directory)" >&2; usage; }
[ ${#debs[@]} -gt 0 ] || { echo "apt-repo: name at least one .deb to publish" >&2; usage; }
for deb in "${debs[@]}"; do
    dpkg-deb -f "$deb" Package >/dev/null 2>&1 || { echo "apt-repo: $deb is not a Debian package" >&2; exit 1; }
done

need=()
command -v apt-ftparchive >/dev/null || need+=(apt-utils)
command -v gpg >/dev/null || need+=(gpg)
if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "apt-repo: needs ${need[*]} (apt-get install ${need[*]})" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
gpg --batch --list-secret-keys "$key" >/dev/null 2>&1 \
    || { echo "apt-repo: no secret key '$key' in ${GNUPGHOME:-~/.gnupg}" >&2; exit 1; }

suite=stable
pool="$out/pool/main"
dist="$out/dists/$suite"
mkdir -p "$pool"
for deb in "${debs[@]}"; do
    # Debian's file name (package_version_arch.deb, the epoch left out), so versions never collide.
    name="$(dpkg-deb -f "$deb" Package)_$(dpkg-deb -f "$deb" Version | sed 's/^[0-9]*://')_$(dpkg-deb -f "$deb" Architecture).deb"
    cp "$deb" "$pool/$name"
done

# One binary-ARCH index per architecture in the pool (`all` packages are listed in each).
mapfile -t arches < <(for f in "$pool"/*.deb; do dpkg-deb -f "$f" Architecture; done | grep -vx all | sort -u)
[ ${#arches[@]} -gt 0 ] || arches=(amd64)
rm -rf "$dist"
for arch in "${arches[@]}"; do
    dir="$dist/main/binary-$arch"
    mkdir -p "$dir"
    # Paths in Packages are relative to the repository root (Filename: pool/main/...).
    (cd "$out" && apt-ftparchive --arch "$arch" packages pool/main) >"$dir/Packages"
    gzip -9nc "$dir/Packages" >"$dir/Packages.gz"
done
(cd "$dist" && apt-ftparchive \
    -o APT::FTPArchive::Release::Origin=flxp \
    -o APT::FTPArchive::Release::Label=flxp \
    -o APT::FTPArchive::Release::Suite="$suite" \
    -o APT::FTPArchive::Release::Codename="$suite" \
    -o APT::FTPArchive::Release::Components=main \
    -o APT::FTPArchive::Release::Architectures="${arches[*]}" \
    -o APT::FTPArchive::Release::Description="flxp packages" \
    release .) >"$out/Release.tmp"
mv "$out/Release.tmp" "$dist/Release"
gpg --batch --yes --local-user "$key" --clearsign --output "$dist/InRelease" "$dist/Release"
gpg --batch --yes --local-user "$key" --armor --detach-sign --output "$dist/Release.gpg" "$dist/Release"
gpg --batch --yes --export "$key" >"$out/flxp-archive-keyring.gpg"

echo "apt-repo: $out signed by $key: $(ls "$pool" | tr '\n' ' ')"
echo "apt-repo: on a client, as root:"
echo "  install -m 0644 flxp-archive-keyring.gpg /usr/share/keyrings/flxp-archive-keyring.gpg"
echo "  echo 'deb [signed-by=/usr/share/keyrings/flxp-archive-keyring.gpg] https://YOUR-HOST/PATH $suite main' >/etc/apt/sources.list.d/flxp.list"
echo "  apt update && apt install flxp"
