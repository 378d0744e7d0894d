#!/usr/bin/env bash
# Fuzzes the HTTP API against its own OpenAPI document: starts `belay dev` on
# free ports with a data dir of its own, waits until it is ready, runs
# schemathesis with every check on (the stateful phase included) using the dev
# token, stops `belay dev` by pid and removes what it left. Exits non-zero on
# any finding.
#
#   scripts/api-fuzz.sh /path/to/belay
#
# Environment:
#   BELAY_TEMPORAL_BIN          the Temporal CLI (scripts/setup.sh prints it)
#   BELAY_SCHEMATHESIS_BIN      schemathesis (default: the one setup.sh installs)
#   BELAY_FUZZ_MAX_EXAMPLES     test cases per operation and phase (default 25: about 3,200
#                               cases, two to three minutes on two cores)
#   BELAY_FUZZ_SEED             schemathesis's seed (default 1, so CI generates the same cases
#                               each run; `random` draws a fresh one, printed)
#   BELAY_FUZZ_REPORT_DIR       keep schemathesis's reports here (default: removed)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

belay=${1:?usage: scripts/api-fuzz.sh /path/to/belay}
[ -x "$belay" ] || belay_die "$belay is not an executable"
st=${BELAY_SCHEMATHESIS_BIN:-${BELAY_TOOLS_DIR:-$HOME/.cache/belay/tools}/schemathesis-venv/bin/schemathesis}
[ -x "$st" ] || belay_die "schemathesis not found at $st; run scripts/setup.sh"
[ -n "${BELAY_TEMPORAL_BIN:-}" ] || belay_die "BELAY_TEMPORAL_BIN is not set; scripts/setup.sh prints it"
export BELAY_TEMPORAL_BIN

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

work=$(mktemp -d)
tag="fuzz-$$"
pid=""
cleanup() {
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        # belay dev stops its pools and its Temporal server on SIGTERM; wait for it, bounded.
        for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    if command -v docker >/dev/null 2>&1; then
        ids=$(docker ps -aq --filter "label=belay.test.run=$tag" 2>/dev/null || true)
        [ -z "$ids" ] || docker rm -f $ids >/dev/null 2>&1 || true
        docker network rm "belay-$tag" >/dev/null 2>&1 || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

port=$(free_port)
temporal_port=$(free_port)
ui_port=$(free_port)
# Sandboxes on a network of this run's own, labelled so they are removed with it. schemathesis
# sends bad credentials to every operation from one address: the bound on failed authentication
# (decision 0042; tested on its own) is raised so that they are answered 401.
BELAY_AUTH_FAILURES_FREE=1000000 \
    BELAY_SANDBOX_NETWORK="belay-$tag" BELAY_SANDBOX_LABELS="belay.test=1,belay.test.run=$tag" \
    RUST_LOG=${RUST_LOG:-warn} \
    "$belay" dev --data-dir "$work/data" --port "$port" --temporal-port "$temporal_port" --ui-port "$ui_port" \
    >"$work/dev.out" 2>"$work/dev.log" &
pid=$!

url="http://127.0.0.1:$port"
deadline=$((SECONDS + 120))
until curl -sf "$url/v1/readyz" >/dev/null 2>&1; do
    if ! kill -0 "$pid" 2>/dev/null; then
        tail -n 40 "$work/dev.log" >&2
        belay_die "belay dev exited before it was ready"
    fi
    [ "$SECONDS" -lt "$deadline" ] || { tail -n 40 "$work/dev.log" >&2; belay_die "belay dev not ready after 120 s"; }
    sleep 0.2
done
token=$(cat "$work/data/dev-token")

seed=${BELAY_FUZZ_SEED:-1}
[ "$seed" != random ] || seed=$(python3 -c 'import random; print(random.randrange(2**31))')
belay_log "api-fuzz: schemathesis $("$st" --version | awk '{print $NF}') against $url (seed $seed)"
reports=${BELAY_FUZZ_REPORT_DIR:-$work/reports}
status=0
# schemathesis keeps a cache in its working directory: give it this run's own.
(cd "$work" && "$st" --config-file "$here/schemathesis.toml" run "$url/v1/openapi.json" \
    --checks all \
    --phases examples,coverage,fuzzing,stateful \
    --header "Authorization: Bearer $token" \
    --max-examples "${BELAY_FUZZ_MAX_EXAMPLES:-25}" \
    --seed "$seed" \
    --workers 1 \
    --request-timeout 200 \
    --report junit --report-dir "$reports") \
    || status=$?
if [ "$status" -ne 0 ]; then
    belay_log "api-fuzz: schemathesis found problems (exit $status); last lines of belay dev's log:"
    tail -n 20 "$work/dev.log" >&2
fi
exit "$status"
