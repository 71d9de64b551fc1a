#!/usr/bin/env bash
# How fast the pod trains, in wall time (issue 21): the 8-chip DP job of the
# issue (emb_dim 1024, mlp_dim 4096, 4 layers, 8192 tokens, Adam, v5p:2x4 as
# 2 workers of 4 chips) through the real binaries, and the one-device
# reference on the same job, against this machine's matmul throughput.
#   bench/train_speed.sh [--insecure] [--tensor N] [BINDIR ...]
#     BINDIR: default build/bin; give an older build's bin to compare, in
#     turns. --insecure: the pod in plaintext (cluster up --insecure), to
#     see what the default mutual TLS between the two workers costs.
#     --tensor N: the same job with N-way tensor parallelism (the rest
#     data-parallel), to see what the tensor axis costs.
# Per binary directory: the job's wall time for 1 and 3 steps, each step's
# wall time, prepare (the job's wall minus its steps: weights, Adam state,
# the teacher), model GFLOP/s (6 B P per step over the step's wall time,
# the teacher's forward and every host-side extra not counted) and that as
# a fraction of the machine's peak (best bare BLIS sgemm per core, from
# matmul_bench, times the cores) and of its sustained throughput around the
# jobs (matmul_bench --sustained), then `tpuemu reference` on 1 and on every
# core. Losses and parameters must be the same in every row: they are
# printed so a change that moved a bit shows.
set -euo pipefail
cd "$(dirname "$0")/.."
pod_flags=()
tensor=1
unset TPUEMU_INSECURE  # the caller's: --insecure below says it for this script's own pod
while [[ ${1:-} == --* ]]; do
  case $1 in
    --insecure)
      pod_flags=(--insecure)
      export TPUEMU_INSECURE=1  # the CLI's side of it
      shift ;;
    --tensor)
      [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "--tensor '${2:-}': give the tensor-parallel chips, e.g. 2" >&2; exit 2; }
      tensor=$2; shift 2 ;;
    *) echo "unknown flag $1 (allowed: --insecure, --tensor N)" >&2; exit 2 ;;
  esac
done
dirs=("$@")
[[ ${#dirs[@]} -gt 0 ]] || dirs=(build/bin)
if [[ ${#} -eq 0 ]]; then
  cmake --build build --target tpuemu tpuemu-worker tpuemu-coordinator matmul_bench >/dev/null
fi
work=$(mktemp -d)
# A pod of its own, whatever pod the caller's environment points at (its
# TPUEMU_INSECURE, from --insecure above, is the script's own).
export TPUEMU_HOME=$work/home
unset TPUEMU_COORDINATOR TPUEMU_TLS_CA TPUEMU_TLS_DIR TPUEMU_TOKEN TPUEMU_TOKEN_FILE
trap 'for d in "${dirs[@]}"; do HOME=$work/home "$d/tpuemu" cluster down >/dev/null 2>&1 || true; done; rm -rf "$work"' EXIT
mkdir -p "$work/home"
# What failed, with what it said (the commands' own messages go to a file,
# not over the tables).
set -E
trap 'echo "train_speed.sh: line $LINENO failed: $BASH_COMMAND" >&2; tail -n 5 "$work/err" >&2 2>/dev/null' ERR
job() {  # job STEPS FILE
  cat >"$2" <<EOF
name: dp8-speed
ici_data_parallelism: -1
ici_fsdp_parallelism: 1
ici_tensor_parallelism: $tensor
emb_dim: 1024
mlp_dim: 4096
num_layers: 4
global_batch_tokens: 8192
steps: $1
seed: 1
opt_type: adam
learning_rate: 0.003
activation: gelu
EOF
}
job 1 "$work/one.yaml"
job 3 "$work/three.yaml"

cpuinfo() { grep -m1 "^$1" /proc/cpuinfo | cut -d: -f2 | xargs; }
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(cpuinfo 'model name')\
 (cpu family $(cpuinfo 'cpu family')), kernel $(uname -r)"
# The machine's matmul peak: the best bare BLIS sub-configuration at n=1024,
# one multiply per core at once. Measured before and after the jobs and the
# higher taken: on a shared machine the throughput moves by 20% within
# minutes, and a low peak would flatter the jobs. Bare columns only: the
# row's last four are the best's name, the chip and two ratios.
peak() {
  build/bin/matmul_bench 1024 2>>"$work/err" | awk '$1 == 1024 { best = 0; for (i = 2; i <= NF - 4; i++) if ($i + 0 > best) best = $i + 0; print best }'
}
peak_before=$(peak)
# The machine's sustained matmul throughput, just before and just after each
# binary directory's jobs (the mean of the two taken): every core
# multiplying for 10 s, as a step's multiplies run for seconds among the
# neighbours' bursts, where the peak is the best of short multiplies.
sustained() { build/bin/matmul_bench --sustained 10 2>>"$work/err"; }

rows=$work/rows
for d in "${dirs[@]}"; do
  sustained_before=$(sustained)
  HOME=$work/home "$d/tpuemu" cluster up --local --topology v5p:2x4 --chips-per-host 4 "${pod_flags[@]}" >/dev/null
  for f in one three; do
    t0=$(date +%s.%N)
    HOME=$work/home "$d/tpuemu" submit "$work/$f.yaml" --wait --json >"$work/out.json" 2>>"$work/err"
    t1=$(date +%s.%N)
    python3 - "$d" "$t0" "$t1" "$work/out.json" >>"$rows" <<'EOF2'
import json, sys
d, t0, t1, path = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
j = json.load(open(path))
print(json.dumps({"dir": d, "job_s": t1 - t0, "steps": [s["wall_s"] for s in j["steps"]],
                  "flops": j["summary"]["model_flops_per_step"], "loss0": j["steps"][0]["loss"],
                  "l2": j["summary"]["param_l2"]}))
EOF2
  done
  HOME=$work/home "$d/tpuemu" cluster down >/dev/null
  echo "$d $sustained_before $(sustained)" >>"$work/sustained"
done
peak_after=$(peak)
echo "pod: ${pod_flags[*]:-mutual TLS (the default)}; tensor parallelism: $tensor"
echo "matmul peak: ${peak_before} before the jobs, ${peak_after} after, GFLOP/s per core (best bare BLIS sgemm, n=1024, matmul_bench), $(nproc) cores"
echo
python3 - "$rows" "$peak_before" "$peak_after" "$(nproc)" "$work/sustained" <<'EOF2'
import json, sys
rows, peak, cores = sys.argv[1], max(float(sys.argv[2]), float(sys.argv[3])), int(sys.argv[4])
around = {d: (float(before), float(after)) for d, before, after in (l.split() for l in open(sys.argv[5]))}
print("%-28s %6s %8s %8s %22s %10s %9s %14s %12s %12s" % ("binaries", "steps", "job_s", "prepare_s", "step wall_s",
                                                         "model GF/s", "of peak", "of sustained", "loss0", "param L2"))
for line in open(rows):
    r = json.loads(line)
    gfs = r["flops"] / min(r["steps"]) / 1e9
    sustained = sum(around[r["dir"]]) / 2
    print("%-28s %6d %8.2f %8.2f %22s %10.1f %8.0f%% %13.0f%% %.9f %12.6f" % (
        r["dir"][-28:], len(r["steps"]), r["job_s"], r["job_s"] - sum(r["steps"]),
        " ".join("%.2f" % s for s in r["steps"]), gfs, 100 * gfs / (peak * cores),
        100 * gfs / (sustained * cores), r["loss0"], r["l2"]))
print("sustained (GFLOP/s per core, every core multiplying for 10 s, before / after each directory's jobs): " +
      "; ".join("%s %.1f / %.1f" % (d, *ba) for d, ba in around.items()))
EOF2
echo
echo "one-device reference, 1 step (tpuemu reference --threads N):"
for d in "${dirs[@]}"; do
  counts=(1)  # binaries from before --threads ran the reference on one core
  # (The help read whole first: grep -q would close the pipe early, and under
  # pipefail the writer's SIGPIPE made the check fail at random.)
  help=$("$d/tpuemu" reference --help)
  [[ $help == *--threads* ]] && counts=(1 "$(nproc)")
  for threads in "${counts[@]}"; do
    flag=()
    [[ ${#counts[@]} -eq 1 ]] || flag=(--threads "$threads")
    t0=$(date +%s.%N)
    l2=$("$d/tpuemu" reference "$work/one.yaml" --json "${flag[@]}" 2>>"$work/err" | python3 -c 'import json,sys; print("%.6f" % json.load(sys.stdin)["param_l2"])')
    t1=$(date +%s.%N)
    printf "%-28s threads %-3s %8.2f s   param L2 %s\n" "$d" "$threads" "$(echo "$t1 - $t0" | bc)" "$l2"
  done
done
