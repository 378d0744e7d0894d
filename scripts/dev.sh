#!/usr/bin/env bash
# The newcomer's one command: installs what is missing, builds belay and runs
# `belay dev` (Temporal dev server, SQLite database, every worker pool and the
# API in one process tree; Ctrl-C stops all of it). Arguments go to `belay dev`:
#
#   scripts/dev.sh            # prints the API URL, the Temporal Web UI URL and a token
#   scripts/dev.sh --demo     # the same, with a demo catalogue
#
# Environment: CARGO_TARGET_DIR (default $BELAY_TARGET_DIR, else
# /var/tmp/belay-target), and those of setup.sh.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
cd "$here/.."

line=$(bash scripts/setup.sh | tail -n 1)
export BELAY_TEMPORAL_BIN=${line#BELAY_TEMPORAL_BIN=}
[ -x "$BELAY_TEMPORAL_BIN" ] || belay_die "scripts/setup.sh printed no usable BELAY_TEMPORAL_BIN"

belay_export_target_dir
cargo build --release -p belay
exec "$CARGO_TARGET_DIR/release/belay" dev "$@"
