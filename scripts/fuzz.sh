#!/usr/bin/env bash
# Coverage-guided fuzzing of flxp's parsers with libFuzzer, on the stable toolchain.
#
#   scripts/fuzz.sh                     # every target, a short smoke run each (FUZZ_SMOKE_RUNS, 20,000)
#   scripts/fuzz.sh TARGET [RUNS]       # one target for RUNS executions (default 10,000,000)
#   scripts/fuzz.sh TARGET -max_total_time=600   # any libFuzzer flag
#
# Targets: snapshot, tokens, config, sim_request, graphql (see fuzz/fuzz_targets/). The corpus lives in
# fuzz/corpus/TARGET (committed: the seeds and what earlier runs found worth keeping); crashes
# land in fuzz/artifacts/TARGET. Instrumentation is the stable `-C passes=sancov-module`, so no
# nightly toolchain and no cargo-fuzz are needed; libFuzzer itself is built from source by the
# libfuzzer-sys crate (a C++ compiler is needed, as on every Debian with build-essential).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root/fuzz"
export CARGO_TARGET_DIR="${FUZZ_TARGET_DIR:-$root/target/fuzz}"
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
targets=(snapshot tokens config sim_request graphql)

# An explicit --target keeps the instrumentation off build scripts and proc macros.
host="$(rustc -vV | sed -n 's/^host: //p')"
# The smoke (no arguments) builds the unoptimised `smoke` profile: it runs a few thousand inputs,
# so build time dominates. Long runs build `release`.
profile=release
if [ $# -eq 0 ]; then
    profile=smoke
fi
cargo build --profile "$profile" --quiet --bins --target "$host"
bin="$CARGO_TARGET_DIR/$host/$profile"

run() {
    local name="$1"
    shift
    mkdir -p "corpus/$name" "artifacts/$name"
    # -rss_limit_mb: a parser that grows without bound fails the run; -max_len: inputs up to 64 KiB.
    "$bin/$name" "corpus/$name" -artifact_prefix="artifacts/$name/" \
        -rss_limit_mb=2048 -max_len=65536 -timeout=10 -print_final_stats=1 "$@"
}

if [ $# -eq 0 ]; then
    for t in "${targets[@]}"; do
        log="$(mktemp)"
        if ! run "$t" -runs="${FUZZ_SMOKE_RUNS:-20000}" >"$log" 2>&1; then
            tail -n 40 "$log"
            echo "fuzz target $t failed (crash input in fuzz/artifacts/$t)" >&2
            exit 1
        fi
        grep -E "^stat::(number_of_executed_units|peak_rss_mb)" "$log" | sed "s/^/fuzz $t: /"
        rm -f "$log"
    done
    exit 0
fi

t="$1"
shift
if [ $# -eq 0 ]; then
    set -- -runs=10000000
elif [[ "$1" =~ ^[0-9]+$ ]]; then
    n="$1"
    shift
    set -- "-runs=$n" "$@"
fi
run "$t" "$@"
