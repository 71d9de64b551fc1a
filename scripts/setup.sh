#!/usr/bin/env bash
# Installs the Debian packages tpuemu needs. Idempotent: packages already
# present are skipped, and apt-get runs only when something is missing, so
# repeated calls cost a dpkg query and nothing more.
#
#   scripts/setup.sh            everything: build, tests, benchmarks, fuzzing, containers
#   scripts/setup.sh build      only what building the binaries needs (the image's build stage)
set -euo pipefail

BUILD=(
  build-essential cmake ninja-build pkg-config git
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libabsl-dev libblis-dev
  libcli11-dev nlohmann-json3-dev libspdlog-dev libyaml-cpp-dev libsqlite3-dev libcpp-httplib-dev
  # The pod's credentials (services/credentials.cc): OpenSSL's libcrypto.
  libssl-dev
  # PNG charts: librsvg draws the SVG with cairo, text in DejaVu Sans.
  librsvg2-dev fonts-dejavu-core
)
TEST=(
  libgtest-dev libgmock-dev libbenchmark-dev
  openmpi-bin libopenmpi-dev
  python3 python3-yaml python3-grpcio python3-protobuf iproute2 procps util-linux
  clang libclang-rt-dev
  # Real containers for the deployment tests (docker-compose.yml, deploy/):
  # podman with runc, netavark and aardvark-dns (containers find each other
  # by name), catatonit (the pause process of `podman kube play` pods),
  # podman-compose, debootstrap for a base image where
  # no registry is reachable, and iptables, which netavark runs to set up
  # container networks (not a dependency of Debian's package).
  podman podman-compose runc netavark aardvark-dns catatonit debootstrap iptables
  # Headless Chromium drives the web view's test (tests/e2e/web_view_e2e_test.py).
  chromium
)

case "${1:-all}" in
  build) PACKAGES=("${BUILD[@]}") ;;
  all) PACKAGES=("${BUILD[@]}" "${TEST[@]}") ;;
  *) echo "setup: unknown group '$1'; use 'build' or nothing (everything)" >&2; exit 2 ;;
esac

# kubectl (with kustomize v5) renders deploy/kubernetes in the tests. Debian
# has no such package; this project's machines have Google's repository,
# whose package is named kubectl. Elsewhere, install kubectl >= 1.27 yourself.
if [[ "${1:-all}" == all ]] && ! command -v kubectl >/dev/null; then
  PACKAGES+=(kubectl)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" || {
  # Only kubectl may be unavailable (no repository provides it): say so and go on.
  [[ " ${missing[*]} " == *" kubectl "* ]] || exit 1
  echo "setup: no package provides kubectl here; install kubectl >= 1.27 for the Kubernetes tests" >&2
  without=("${missing[@]/kubectl/}")
  $SUDO apt-get install -y -qq --no-install-recommends ${without[@]}
}
echo "setup: done"
