#!/usr/bin/env bash
# Stops the test cluster started by scripts/pg-start.sh. Idempotent.
# Its data stays in BELAY_PG_DIR (default /var/tmp/belay-pg); delete that
# directory to start from an empty cluster next time.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

dir=${BELAY_PG_DIR:-/var/tmp/belay-pg}

if [ ! -f "$dir/PG_VERSION" ]; then
    belay_log "pg-stop: no cluster in $dir"
    exit 0
fi
bindir=$(belay_pg_bindir) || belay_die "PostgreSQL server binaries not found"

if belay_as_pg_owner "$bindir/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
    belay_as_pg_owner "$bindir/pg_ctl" -D "$dir" -m fast -w -t 60 stop >&2
else
    belay_log "pg-stop: not running ($dir)"
fi
