# syntax=docker/dockerfile:1
# The belay images: one `belay` binary for every service in compose.yaml
# (`belay migrate`, `belay api`, `belay worker --pools …`).
#
#   docker build -t belay:latest .                                   # every service
#   docker build --target belay-browser -t belay-browser:latest .    # + Chromium, for the browser pool

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

# Default target: last, so `docker build .` builds it without Chromium.
FROM runtime AS belay
USER belay
