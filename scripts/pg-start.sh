#!/usr/bin/env bash
# Starts a throwaway PostgreSQL cluster for the test suite and prints its URL:
#   BELAY_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:<port>/postgres
# Idempotent: if the cluster is already running it only prints the URL.
# Trust authentication, fsync off, listening on 127.0.0.1 only: for tests, never
# for data you want to keep. Stop it with scripts/pg-stop.sh.
#
# Environment:
#   BELAY_PG_DIR   the cluster's data directory (default /var/tmp/belay-pg)
#   BELAY_PG_PORT  the port (default 55432)
#   BELAY_PG_SSL_CERT, BELAY_PG_SSL_KEY  a server certificate and key (PEM): the server starts
#                  with ssl=on serving them (copied into the data directory, the key mode 600)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

dir=${BELAY_PG_DIR:-/var/tmp/belay-pg}
port=${BELAY_PG_PORT:-55432}
url="postgres://postgres@127.0.0.1:$port/postgres"

case $dir in
    /*) ;;
    *) dir=$(pwd)/$dir ;;
esac
case $dir in
    *[[:space:]\'\"\\]*) belay_die "BELAY_PG_DIR must not contain spaces or quotes: $dir" ;;
esac

bindir=$(belay_pg_bindir) || belay_die "PostgreSQL server binaries not found; run scripts/setup.sh"

if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 \
        || belay_die "running as root needs a 'postgres' OS user to own the cluster (apt-get install postgresql creates one)"
fi

if [ ! -f "$dir/PG_VERSION" ]; then
    if [ -e "$dir" ] && [ -n "$(ls -A "$dir" 2>/dev/null)" ]; then
        belay_die "$dir exists but is not a PostgreSQL cluster; remove it or set BELAY_PG_DIR"
    fi
    if [ "$(id -u)" -eq 0 ]; then
        install -d -m 700 -o postgres -g postgres "$dir"
    else
        install -d -m 700 "$dir"
    fi
    belay_log "pg-start: initdb $dir"
    out=$(belay_as_pg_owner "$bindir/initdb" -D "$dir" -U postgres \
        --auth-local=trust --auth-host=trust -E UTF8 --locale=C 2>&1) \
        || { printf '%s\n' "$out" >&2; belay_die "initdb failed"; }
fi

major=$("$bindir/pg_ctl" --version | sed -E 's/^[^0-9]*([0-9]+).*/\1/')
[ "$(cat "$dir/PG_VERSION")" = "$major" ] \
    || belay_die "$dir holds a PostgreSQL $(cat "$dir/PG_VERSION") cluster but the server found is $major; remove $dir"

if belay_as_pg_owner "$bindir/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
    # Line 4 of postmaster.pid is the port the running server listens on.
    running_port=$(sed -n 4p "$dir/postmaster.pid")
    [ "$running_port" = "$port" ] \
        || belay_die "the cluster in $dir is running on port $running_port, not $port; stop it with scripts/pg-stop.sh"
    belay_log "pg-start: already running in $dir"
else
    ssl=""
    if [ -n "${BELAY_PG_SSL_CERT:-}" ] || [ -n "${BELAY_PG_SSL_KEY:-}" ]; then
        [ -r "${BELAY_PG_SSL_CERT:-}" ] || belay_die "BELAY_PG_SSL_CERT must name a readable certificate file"
        [ -r "${BELAY_PG_SSL_KEY:-}" ] || belay_die "BELAY_PG_SSL_KEY must name a readable key file"
        owner=()
        [ "$(id -u)" -eq 0 ] && owner=(-o postgres -g postgres)
        install -m 644 "${owner[@]}" "$BELAY_PG_SSL_CERT" "$dir/server.crt"
        install -m 600 "${owner[@]}" "$BELAY_PG_SSL_KEY" "$dir/server.key"
        ssl=" -c ssl=on -c ssl_cert_file=$dir/server.crt -c ssl_key_file=$dir/server.key"
    fi
    belay_log "pg-start: starting PostgreSQL $major on 127.0.0.1:$port (data $dir)${ssl:+ with TLS}"
    belay_as_pg_owner "$bindir/pg_ctl" -D "$dir" -l "$dir/postgres.log" -w -t 60 \
        -o "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories=$dir -c fsync=off -c max_connections=300 -c shared_buffers=128MB$ssl" \
        start >&2 \
        || { tail -n 20 "$dir/postgres.log" >&2 || true; belay_die "PostgreSQL did not start"; }
fi

deadline=$((SECONDS + 60))
until "$bindir/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres; do
    if [ "$SECONDS" -ge "$deadline" ]; then
        tail -n 20 "$dir/postgres.log" >&2 || true
        belay_die "PostgreSQL in $dir is not accepting connections on 127.0.0.1:$port"
    fi
    sleep 0.2
done

echo "BELAY_TEST_POSTGRES_URL=$url"
