#!/usr/bin/env bash
# Builds the tpuemu image (one image for every role) from the Dockerfile,
# with docker or podman, whichever exists.
#
#   scripts/image.sh                 build inside the image's build stage (what users run)
#   scripts/image.sh --from-host     reuse this machine's build/bin (Debian 12, same
#                                    libraries as the image): what the tests use, to
#                                    avoid compiling the project twice on 2 cores
#   TPUEMU_IMAGE=name:tag            the tag to build (default tpuemu:dev)
#
# Where no registry is reachable, the debian:bookworm and debian:bookworm-slim
# bases are first made locally from the Debian archive that apt already uses
# (debootstrap, then import), once; later runs reuse them.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/container-env.sh

IMAGE="${TPUEMU_IMAGE:-tpuemu:dev}"
BINARIES=build
if [[ "${1:-}" == "--from-host" ]]; then
  BINARIES=host
  mkdir -p build/image
  for b in tpuemu tpuemu-worker tpuemu-coordinator; do
    [[ -x build/bin/$b ]] || { echo "image: build/bin/$b is missing; build first (cmake --build build)" >&2; exit 1; }
    # Only when the build changed: an unchanged context keeps the image cached.
    if [[ ! build/image/$b -nt build/bin/$b ]]; then strip -o build/image/$b build/bin/$b; fi
  done
elif [[ -n "${1:-}" ]]; then
  echo "image: unknown argument '$1'; use --from-host or nothing" >&2
  exit 2
fi

have_image() { $ENGINE image exists "$1" 2>/dev/null || $ENGINE image inspect "$1" >/dev/null 2>&1; }

# The archive apt uses on this machine (deb822 or one-line sources).
debian_mirror() {
  local uri
  uri=$(grep -hoE '^URIs: *[^ ]+' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -1 |
        sed 's/^URIs: *//') || true
  [[ -z "$uri" ]] && uri=$(grep -hoE '^deb +[^ ]*debian[^ ]*' /etc/apt/sources.list 2>/dev/null | grep -v security |
                           head -1 | awk '{print $2}') || true
  echo "${uri:-http://deb.debian.org/debian}"
}

make_base() {
  local rootfs
  rootfs=$(mktemp -d /var/tmp/tpuemu-rootfs.XXXXXX)
  trap 'rm -rf "$rootfs"' RETURN
  echo "image: no debian:bookworm image here and no registry; making one with debootstrap from $(debian_mirror)"
  command -v debootstrap >/dev/null || { echo "image: debootstrap is missing (scripts/setup.sh containers)" >&2; exit 1; }
  debootstrap --variant=minbase bookworm "$rootfs" "$(debian_mirror)" >/var/tmp/tpuemu-debootstrap.log 2>&1 || {
    tail -20 /var/tmp/tpuemu-debootstrap.log >&2; exit 1; }
  # apt inside the image talks to the same archive the build stage will use.
  echo "deb $(debian_mirror) bookworm main" >"$rootfs/etc/apt/sources.list"
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | $ENGINE import - docker.io/library/debian:bookworm >/dev/null
  # debootstrap's minbase is what Debian's -slim images are cut from; one
  # local base serves as both (with a registry, the real images are pulled).
  $ENGINE tag docker.io/library/debian:bookworm docker.io/library/debian:bookworm-slim
}

if ! have_image docker.io/library/debian:bookworm || ! have_image docker.io/library/debian:bookworm-slim; then
  if ! $ENGINE pull -q docker.io/library/debian:bookworm >/dev/null 2>&1 ||
     ! $ENGINE pull -q docker.io/library/debian:bookworm-slim >/dev/null 2>&1; then
    make_base
  fi
fi

echo "image: building $IMAGE with $ENGINE (binaries: $BINARIES)"
# Host networking for RUN steps: they only fetch Debian packages, and on this
# project's machines a netavark bridge container could not reach the DNS
# server the host uses (apt-get update failed to resolve the archive).
$ENGINE build --network host --build-arg BINARIES="$BINARIES" -t "$IMAGE" -f Dockerfile . >/var/tmp/tpuemu-image-build.log 2>&1 || {
  tail -30 /var/tmp/tpuemu-image-build.log >&2; exit 1; }
size=$($ENGINE image inspect "$IMAGE" --format '{{.Size}}')
echo "image: $IMAGE built, $((size / 1000000)) MB"
