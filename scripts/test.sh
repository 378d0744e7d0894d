#!/usr/bin/env bash
# The one command that runs belay's whole test suite; CI runs exactly this.
#
#   scripts/test.sh
#
# Installs missing prerequisites (scripts/setup.sh), starts a throwaway
# PostgreSQL (scripts/pg-start.sh; left running for the next run, stop it with
# scripts/pg-stop.sh), checks compose.yaml, builds every target and runs every
# test: the store tests on SQLite and Postgres, the workflow and activity tests
# against Temporal dev servers they start themselves from BELAY_TEMPORAL_BIN.
#
# Environment:
#   CARGO_TARGET_DIR   build directory (default $BELAY_TARGET_DIR, else /var/tmp/belay-target)
#   and those of setup.sh, pg-start.sh and api-fuzz.sh.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
cd "$here/.."

step() { belay_log ""; belay_log "==> $*"; }

step "prerequisites"
line=$(bash scripts/setup.sh | tail -n 1)
export BELAY_TEMPORAL_BIN=${line#BELAY_TEMPORAL_BIN=}
[ -x "$BELAY_TEMPORAL_BIN" ] || belay_die "scripts/setup.sh printed no usable BELAY_TEMPORAL_BIN"

step "postgres"
line=$(bash scripts/pg-start.sh | tail -n 1)
export BELAY_TEST_POSTGRES_URL=${line#BELAY_TEST_POSTGRES_URL=}
[ -n "$BELAY_TEST_POSTGRES_URL" ] || belay_die "scripts/pg-start.sh printed no BELAY_TEST_POSTGRES_URL"
belay_log "BELAY_TEST_POSTGRES_URL=$BELAY_TEST_POSTGRES_URL (left running; stop it with scripts/pg-stop.sh)"
# Each store test creates its own belay_t_<hex> database; drop those an earlier run left.
psql "$BELAY_TEST_POSTGRES_URL" -Atqc "select datname from pg_database where datname like 'belay\_t\_%'" |
    while read -r db; do psql "$BELAY_TEST_POSTGRES_URL" -qc "drop database if exists \"$db\"" >/dev/null; done

step "compose.yaml"
# The file requires a token secret of its deployment; the check supplies a placeholder.
if docker compose version >/dev/null 2>&1; then
    BELAY_GIT_TOKEN_SECRET=compose-check BELAY_ARTIFACT_SECRET=compose-check-artifact-secret-32-bytes docker compose -f compose.yaml config -q
elif command -v docker-compose >/dev/null 2>&1; then
    BELAY_GIT_TOKEN_SECRET=compose-check BELAY_ARTIFACT_SECRET=compose-check-artifact-secret-32-bytes docker-compose -f compose.yaml config -q
else
    belay_log "skipped: neither 'docker compose' nor 'docker-compose' is installed"
fi

step "sandbox image"
bash scripts/build-sandbox-image.sh >/dev/null

belay_export_target_dir
belay_log ""
belay_log "CARGO_TARGET_DIR=$CARGO_TARGET_DIR"

step "cargo build --workspace --all-targets"
cargo build --workspace --all-targets

step "cargo fmt --all -- --check"
cargo fmt --all -- --check

step "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

# schemathesis against `belay dev` and the test suite both spend most of their time
# waiting on HTTP, Temporal and containers: the fuzz runs beside the tests, its output
# kept in a log printed when it ends, and either failing fails the run.
fuzz_log=$(mktemp)
fuzz_pid=""
stop_fuzz() { [ -z "$fuzz_pid" ] || kill -TERM "$fuzz_pid" 2>/dev/null || true; rm -f "$fuzz_log"; }
trap stop_fuzz EXIT
step "schemathesis against belay dev (scripts/api-fuzz.sh), beside the tests"
bash scripts/api-fuzz.sh "$CARGO_TARGET_DIR/debug/belay" >"$fuzz_log" 2>&1 &
fuzz_pid=$!

tests=0
if cargo nextest --version >/dev/null 2>&1; then
    # nextest does not run doctests: run them first, so nextest's summary closes the output.
    step "cargo test --workspace --doc"
    cargo test --workspace --doc || tests=$?
    step "cargo nextest run --workspace --no-fail-fast (settings in .config/nextest.toml)"
    cargo nextest run --workspace --no-fail-fast || tests=$?
else
    step "cargo test --workspace --no-fail-fast"
    cargo test --workspace --no-fail-fast || tests=$?
fi

step "schemathesis (scripts/api-fuzz.sh): its output"
fuzz=0
wait "$fuzz_pid" || fuzz=$?
fuzz_pid=""
cat "$fuzz_log"
[ "$fuzz" -eq 0 ] || belay_log "api-fuzz failed (exit $fuzz)"
[ "$tests" -eq 0 ] || belay_log "tests failed (exit $tests)"
[ "$fuzz" -eq 0 ] && [ "$tests" -eq 0 ]
