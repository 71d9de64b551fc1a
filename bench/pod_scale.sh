#!/usr/bin/env bash
# Real data on big local pods (issue 21): for 64, 128, 256 and 512 chips of
# v5p (4 chips per worker process, every process on this machine), how long
# the pod takes to start, an 8 MiB all-gather over x,y (every chip in the
# ring pair of its x-y plane; 4 MiB at 512 chips, where 8 MiB is refused by
# the pod's 12 GiB host-memory limit: 512 chips x 16 MiB of f32 gathered,
# plus the frames in flight) and a 2-step data-parallel training job over the
# whole pod take in wall time, and the workers' resident memory per chip:
# idle, at each job's peak, and once the pod is idle again.
#   bench/pod_scale.sh [CHIPS ...]     (default: 64 128 256 512)
# Prints a table, then a plot of wall time per job against chips.
# The training job: emb_dim 256, mlp_dim 768 (so that a layer's gradient
# splits over 512 chips and a torus' 3 axis parts), 2 layers, 8192 tokens,
# Adam. Minutes per size above 256 chips on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=("$@")
[[ ${#sizes[@]} -gt 0 ]] || sizes=(64 128 256 512)
for chips in "${sizes[@]}"; do  # all checked before the first pod starts
  case $chips in
    64 | 128 | 256 | 512) ;;
    *) echo "pod_scale.sh: '$chips' chips: give 64, 128, 256 or 512 (none: all four)" >&2; exit 2 ;;
  esac
done
bin=build/bin
if [[ ${#} -eq 0 ]]; then cmake --build build --target tpuemu tpuemu-worker tpuemu-coordinator >/dev/null; fi
work=$(mktemp -d)
# A pod of its own, whatever pod the caller's environment points at: the
# state directory, and no other coordinator or credentials.
export HOME=$work/home TPUEMU_HOME=$work/home
unset TPUEMU_COORDINATOR TPUEMU_TLS_CA TPUEMU_TLS_DIR TPUEMU_TOKEN TPUEMU_TOKEN_FILE TPUEMU_INSECURE
trap '"$bin/tpuemu" cluster down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
mkdir -p "$HOME"
cat >"$work/dp.yaml" <<EOF
name: dp-scale
ici_data_parallelism: -1
ici_fsdp_parallelism: 1
emb_dim: 256
mlp_dim: 768
num_layers: 2
global_batch_tokens: 8192
steps: 2
seed: 1
opt_type: adam
learning_rate: 0.003
EOF

shape() {
  case $1 in
    64) echo 4x4x4 8MiB ;; 128) echo 4x4x8 8MiB ;; 256) echo 4x8x8 8MiB ;; 512) echo 8x8x8 4MiB ;;
  esac
}
workers_rss() {  # this pod's worker processes' VmRSS, bytes, summed (not another pod's on the machine)
  local total=0
  for pid in $(python3 -c 'import json, sys; print(*[w["pid"] for w in json.load(open(sys.argv[1]))["workers"]])' \
                 "$TPUEMU_HOME/pod.json"); do
    total=$((total + $(awk '/^VmRSS:/{print $2}' "/proc/$pid/status" 2>/dev/null || echo 0) * 1024))
  done
  echo $total
}
settled_rss() {  # after a job: the workers (--keep-memory-for 2s below) have given memory back
  sleep 3
  workers_rss
}
now() { date +%s.%N; }

cpuinfo() { grep -m1 "^$1" /proc/cpuinfo | cut -d: -f2 | xargs; }
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(cpuinfo 'model name')\
 (cpu family $(cpuinfo 'cpu family')), kernel $(uname -r)"
rows=$work/rows.jsonl
for chips in "${sizes[@]}"; do
  read -r shape_ ag_bytes <<<"$(shape "$chips")"
  topo=v5p:$shape_
  echo "$topo: starting $((chips / 4)) workers" >&2
  t0=$(now)
  "$bin/tpuemu" cluster up --local --topology "$topo" --chips-per-host 4 --keep-memory-for 2s >/dev/null
  t1=$(now)
  sleep 2
  idle=$(workers_rss)
  t2=$(now)
  "$bin/tpuemu" bench collective --op all-gather --axes x,y --bytes "$ag_bytes" --json >"$work/ag.json"
  t3=$(now)
  ag_after=$(settled_rss)
  t4=$(now)
  "$bin/tpuemu" submit "$work/dp.yaml" --wait --json >"$work/dp.json"
  t5=$(now)
  dp_after=$(settled_rss)
  python3 - "$chips" "$topo" "$t0" "$t1" "$t2" "$t3" "$t4" "$t5" "$idle" "$ag_after" "$dp_after" \
    "$work/ag.json" "$work/dp.json" >>"$rows" <<'EOF'
import json, sys
chips, topo = int(sys.argv[1]), sys.argv[2]
t0, t1, t2, t3, t4, t5 = map(float, sys.argv[3:9])
idle, ag_after, dp_after = map(int, sys.argv[9:12])
ag = json.load(open(sys.argv[12]))["results"][0]
dp = json.load(open(sys.argv[13]))
assert ag["correct"] and dp["state"] == "succeeded", (ag["correct"], dp["state"])
peak = lambda mem: sum(m["peak_bytes"] for m in mem)
print(json.dumps({
    "chips": chips, "topology": topo, "up_s": t1 - t0, "idle_bytes": idle,
    "ag_bytes": ag["bytes"], "ag_s": t3 - t2, "ag_collective_wall_s": ag["wall_s"], "ag_emulated_s": ag["emulated_s"],
    "ag_peak_bytes": peak(ag["worker_memory"]), "ag_after_bytes": ag_after,
    "dp_s": t5 - t4, "dp_step_wall_s": [s["wall_s"] for s in dp["steps"]],
    "dp_emulated_step_s": dp["steps"][-1]["emulated_step_s"], "dp_loss": [s["loss"] for s in dp["steps"]],
    "dp_peak_bytes": peak(dp["worker_memory"]), "dp_after_bytes": dp_after}))
EOF
  "$bin/tpuemu" cluster down >/dev/null
done

python3 - "$rows" <<'EOF'
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
mib = lambda b, n: b / n / 1048576
print("\nag: the all-gather over x,y of that many bytes (V); wall time: the client's, from command to answer (cluster up; bench collective; submit --wait).")
print("memory: the worker processes' resident memory (VmRSS; peaks from each worker's VmHWM over the job)")
print("per chip; 'after' is 3 s after the job, once the workers gave memory back.\n")
print(f"{'chips':>5} {'workers':>7} {'up_s':>6} {'idle':>6} | {'ag':>4} {'ag_s':>6} {'(moving)':>8} {'peak':>6} {'after':>6}"
      f" | {'dp2_s':>6} {'steps_s':>13} {'peak':>6} {'after':>6}   (MiB per chip)")
for r in rows:
    n = r["chips"]
    steps = " ".join(f"{s:.1f}" for s in r["dp_step_wall_s"])
    print(f"{n:>5} {n // 4:>7} {r['up_s']:>6.1f} {mib(r['idle_bytes'], n):>6.1f} | {r['ag_bytes'] >> 20:>2}Mi {r['ag_s']:>6.2f} "
          f"{r['ag_collective_wall_s']:>8.2f} {mib(r['ag_peak_bytes'], n):>6.1f} {mib(r['ag_after_bytes'], n):>6.1f}"
          f" | {r['dp_s']:>6.1f} {steps:>13} {mib(r['dp_peak_bytes'], n):>6.1f} {mib(r['dp_after_bytes'], n):>6.1f}")
print("\nwall time against chips (log-log; a = all-gather job, d = 2-step DP job, u = cluster up):")
width, height = 60, 14
pts = [(r["chips"], r[k], c) for r in rows for k, c in (("ag_s", "a"), ("dp_s", "d"), ("up_s", "u"))]
xs = [math.log2(p[0]) for p in pts]; ys = [math.log10(max(p[1], 1e-3)) for p in pts]
x0, x1 = min(xs), max(xs) + 1e-9; y0, y1 = min(ys), max(ys) + 1e-9
grid = [[" "] * (width + 1) for _ in range(height + 1)]
for (n, v, c), x, y in zip(pts, xs, ys):
    grid[height - round((y - y0) / (y1 - y0) * height)][round((x - x0) / (x1 - x0) * width)] = c
for i, line in enumerate(grid):
    label = f"{10 ** (y1 - i * (y1 - y0) / height):7.1f} s |" if i % 3 == 0 else "          |"
    print(label + "".join(line))
print("          +" + "-" * (width + 1))
print("           " + "".join(f"{r['chips']:<{width // max(len(rows) - 1, 1)}}" for r in rows))
print("\nlosses (DP, 2 steps):", "; ".join(f"{r['chips']}: " + ", ".join(f"{l:.6f}" for l in r["dp_loss"]) for r in rows))
EOF
