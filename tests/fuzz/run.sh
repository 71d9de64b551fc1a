#!/usr/bin/env bash
# Builds the matmul-notation fuzzer with clang and runs it for SECONDS
# (default 60) on the seed corpus. Exit non-zero on any crash, leak,
# sanitizer report or timeout; the reproducer lands in build-fuzz/.
#   tests/fuzz/run.sh 600     # a longer session
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds="${1:-60}"
cmake -S tests/fuzz -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz
corpus=build-fuzz/corpus
mkdir -p "$corpus"
cp -n tests/fuzz/corpus/* "$corpus"/ 2>/dev/null || true
cd build-fuzz
./matmul_expr_fuzz -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=256 \
  -print_final_stats=1 corpus
mkdir -p frames && ./frame_decode_fuzz -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 -print_final_stats=1 frames ../tests/fuzz/corpus-frames
