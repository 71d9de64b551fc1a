#!/usr/bin/env bash
# Builds the fuzzers with clang and runs each for SECONDS (default 30) on its
# seed corpus. Exit non-zero on any crash, leak, sanitizer report or timeout;
# the reproducer lands in build-fuzz/.
#   tests/fuzz/run.sh 600     # a longer session, per target
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds="${1:-30}"
cmake -S tests/fuzz -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz

# fuzz TARGET MAX_LEN SEED_FILE...: the corpus grows in build-fuzz/corpus-TARGET.
fuzz() {
  local target="$1" max_len="$2"
  shift 2
  local corpus="build-fuzz/corpus-$target"
  mkdir -p "$corpus"
  cp -n "$@" "$corpus"/ 2>/dev/null || true
  echo "== $target: $seconds s"
  (cd build-fuzz && "./$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len="$max_len" \
    -print_final_stats=1 "corpus-$target")
}

fuzz matmul_expr_fuzz 256 tests/fuzz/corpus/*
# Job files are a few hundred bytes of flat keys; the examples seed it.
fuzz job_file_fuzz 4096 examples/jobs/*.yaml
# Peer frames: a header and a payload field; the seeds are real and broken frames.
fuzz frame_decode_fuzz 4096 tests/fuzz/corpus-frames/*
# Bookings, 3 bytes each; no seeds needed.
fuzz busy_timeline_fuzz 768
