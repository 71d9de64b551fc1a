#!/usr/bin/env bash
# docker-compose.yml with whichever compose exists: `docker compose`, or
# podman-compose with the project's podman settings (deploy/podman/).
#   scripts/compose.sh up -d
#   scripts/compose.sh run --rm cli tpuemu jobs
#   scripts/compose.sh down
# What it smooths over in podman-compose 1.0.3 (Debian 12's): the project name
# (docker-compose.yml's `name:`, which it ignores; COMPOSE_PROJECT_NAME or
# "tpuemu" here), and `down`, which leaves the project's network behind; and
# netavark 1.4's bridge, whose MAC changes as containers come and go
# (scripts/pin-bridge-mac.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/container-env.sh
project="${COMPOSE_PROJECT_NAME:-tpuemu}"
# The pod's credentials, before anything starts: without them every container
# fails on its own, and podman-compose still exits 0.
credentials="${TPUEMU_CREDENTIALS:-./tpuemu-credentials}"
if [[ "${1:-}" == up || "${1:-}" == run ]]; then
  for f in ca.pem member.pem member-key.pem admin.token read.token; do
    if [[ ! -e "$credentials/$f" ]]; then
      echo "compose.sh: no $credentials/$f: make the pod's credentials first, as root:" >&2
      echo "  build/bin/tpuemu credentials create $credentials --uid 10001" >&2
      echo "(or set TPUEMU_CREDENTIALS to a directory made so; docs/deploy.md)" >&2
      exit 2
    fi
  done
fi
if [[ $ENGINE == docker ]]; then
  exec docker compose -p "$project" "$@"
fi
podman-compose -p "$project" "$@"
if [[ "${1:-}" == up ]] && podman network exists "${project}_default"; then
  scripts/pin-bridge-mac.sh "${project}_default"  # why: in that script
fi
if [[ "${1:-}" == down ]] && podman network exists "${project}_default"; then
  podman network rm -f "${project}_default" >/dev/null
fi
