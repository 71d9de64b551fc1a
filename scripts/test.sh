#!/usr/bin/env bash
# Installs what is missing, builds everything, and runs every test:
# core (unit), in-process cluster over gRPC (cluster) and the real binaries
# driven through the CLI (e2e, soak), containers, then the fuzzers (matmul notation,
# job files, peer frames, the busy timeline) for
# FUZZ_SECONDS (default 30). Tests that measure wall time run alone.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$(nproc)"
(cd build && ctest --output-on-failure -j"$(nproc)" --timeout 900)
bash tests/fuzz/run.sh "${FUZZ_SECONDS:-30}"
