#!/usr/bin/env bash
# The main demo: build, start an emulated pod of two v5p 4x4 slices (32 chips,
# 8 worker processes) on this machine, run the collectives across it with real
# data, print how the emulated clock compares with the seeds' formulas, and
# stop the pod.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"
export PATH="$PWD/build/bin:$PATH"
export TPUEMU_HOME="${TPUEMU_HOME:-$PWD/.tpuemu/demo}"

tpuemu cluster up --local --topology v5p:4x4 --slices 2
trap 'tpuemu cluster down' EXIT
tpuemu cluster status
echo
for op in all-gather reduce-scatter all-reduce all-to-all; do
  for alg in uni-ring bi-ring; do
    echo "== $op over x, $alg (a wraparound ring of 4 chips) =="
    tpuemu bench collective --op "$op" --axes x --algorithm "$alg" --bytes 64KiB,1MiB,8MiB,64MiB
    echo
  done
done
echo "== all-gather over x and y at once (multi-axis) vs one axis =="
tpuemu bench collective --op all-gather --axes x,y --bytes 32MiB
tpuemu bench collective --op all-gather --axes x --bytes 8MiB
tpuemu bench collective --op all-gather --axes y --bytes 32MiB
echo
echo "== hierarchical all-reduce over both slices: ICI reduce-scatter, DCN all-reduce, ICI all-gather =="
tpuemu bench collective --op all-reduce --axes x,y,dcn --bytes 16MiB
