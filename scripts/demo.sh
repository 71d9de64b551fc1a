#!/usr/bin/env bash
# The main demo: build, start an emulated pod of two v5p 4x4 slices (32 chips,
# 8 worker processes) on this machine, run the collectives across it with real
# data, print how the emulated clock compares with the seeds' formulas, run
# sharded matmuls in the seeds' notation, and stop the pod.
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
echo
echo "== a sharded matmul in the seed's notation: planned, run with BLIS on all 32 chips, checked =="
tpuemu matmul "A[I_X, J_Y] * B[J_X, K_Y] -> C[I_X, K_Y]" --dims I=2048,J=2048,K=2048
echo
echo "== the seed's question 9: gather A first, or multiply then all-reduce? (--explain prices both) =="
tpuemu matmul "A[I, J_X] * B[J, K] -> C[I, K]" --dims I=512,J=8192,K=64 --explain
echo
echo "== data parallel over DCN, tensor parallel inside each slice =="
tpuemu matmul "In[B_D, M_Y] * Win[M_Y, H_X] -> Out[B_D, H_X]" --dims B=256,M=2048,H=4096 --mesh D=dcn,X=x,Y=y
echo
echo "== pipeline parallel training, 1F1B over 4 stages, data parallel within and across slices: the bubble per step =="
tpuemu submit examples/jobs/pipeline.yaml --wait
