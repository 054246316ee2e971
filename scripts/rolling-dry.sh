#!/bin/bash
# rolling-dry.sh FLXP NODES [PORT] [rolling args...]: times `flxp rolling --dry-run` on a generated zone of
# NODES nodes, ~50 guests each (scripts/big-zone.py), served by `flxp sim` on 127.0.0.1:PORT (default 18731).
# Prints the exit code, wall and CPU seconds and peak memory, the first and last progress lines and the totals.
set -u
FLXP=$1; NODES=$2; PORT=${3:-18731}; shift $(( $# < 3 ? $# : 3 ))
DIR=$(mktemp -d); trap 'rm -rf "$DIR"' EXIT
TOKEN='root@pam!flxp=11111111-1111-1111-1111-111111111111'
python3 "$(dirname "$0")/big-zone.py" "$DIR/zone.json" "$NODES" 50
"$FLXP" sim --scenario "$DIR/zone.json" --listen "127.0.0.1:$PORT" --http --token "$TOKEN" > "$DIR/sim.log" 2>&1 &
SIM=$!
for _ in $(seq 600); do
  curl -s -o /dev/null -H "Authorization: PVEAPIToken=$TOKEN" "http://127.0.0.1:$PORT/_sim/state" && break
  sleep 0.5
done
cat > "$DIR/flxp.toml" <<EOT
[zones.big]
hosts = ["http://127.0.0.1:$PORT"]
token = "root@pam!flxp"
token-secret = "11111111-1111-1111-1111-111111111111"
EOT
/usr/bin/time -f "%e s wall, %U s user, %S s sys, %M KiB" -o "$DIR/time" \
  "$FLXP" rolling --dry-run --zone big --config "$DIR/flxp.toml" "$@" > "$DIR/out" 2> "$DIR/err"
echo "exit code $?: $(tail -1 "$DIR/time")"
grep -m1 ' planned: ' "$DIR/err"; grep ' planned: ' "$DIR/err" | tail -1
tail -1 "$DIR/out"
kill "$SIM"; wait "$SIM" 2>/dev/null
