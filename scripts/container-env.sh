# Sourced by the scripts that run containers: picks docker or podman (ENGINE)
# and the matching compose command (COMPOSE), and points podman at the
# project's own settings (deploy/podman/) so nothing under /etc changes.
_here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  ENGINE=docker
  COMPOSE="docker compose"
elif command -v podman >/dev/null; then
  ENGINE=podman
  COMPOSE=podman-compose
  export CONTAINERS_CONF="${CONTAINERS_CONF:-$_here/deploy/podman/containers.conf}"
  export CONTAINERS_STORAGE_CONF="${CONTAINERS_STORAGE_CONF:-$_here/deploy/podman/storage.conf}"
else
  echo "neither a running docker engine nor podman found; install podman (scripts/setup.sh containers)" >&2
  exit 1
fi
unset _here
