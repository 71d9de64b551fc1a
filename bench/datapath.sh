#!/usr/bin/env bash
# The data-path benchmark and OpenMPI's figures for the same collectives, in
# one run on one machine. Usage: bench/datapath.sh [collectives|p2p|paced|ceilings|all]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build --target datapath_bench ring_floor mpi_collectives tpuemu-worker tpuemu-coordinator >/dev/null
./build/bin/datapath_bench "${1:-all}"
if [[ "${1:-all}" == all || "${1:-all}" == collectives ]]; then
  echo
  ./build/bin/ring_floor grpc 8
  ./build/bin/ring_floor tcp-copy 8
  ./build/bin/ring_floor tcp 8
  echo
  echo "== OpenMPI $(mpirun --version 2>/dev/null | head -1 | awk '{print $NF}'), 8 ranks, same sizes (one untimed, then best of 3) =="
  MPIRUN=(mpirun -np 8 --oversubscribe --allow-run-as-root --bind-to none)
  OMPI_MCA_plm_rsh_agent= "${MPIRUN[@]}" --mca btl tcp,self --mca btl_tcp_if_include lo ./build/bin/mpi_collectives tcp
  # OpenMPI picks its algorithm by size: at 1 MiB not the ring (recursive doubling, Bruck,
  # neighbour exchange: 3-4 rounds for 8 ranks, where a ring takes 7 hops). tpuemu runs the ring,
  # as ICI does; the same transport with OpenMPI's ring forced shows what the algorithm is worth
  # (only all-gather's and all-reduce's are forced: the other lines are its defaults again).
  OMPI_MCA_plm_rsh_agent= "${MPIRUN[@]}" --mca btl tcp,self --mca btl_tcp_if_include lo \
    --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allgather_algorithm 4 \
    --mca coll_tuned_allreduce_algorithm 4 ./build/bin/mpi_collectives tcp-ring
  OMPI_MCA_plm_rsh_agent= "${MPIRUN[@]}" --mca btl vader,self ./build/bin/mpi_collectives shm
  # tpuemu's peer links choose their congestion control (cubic unless TPUEMU_PEER_TCP_CONGESTION
  # says otherwise); OpenMPI's sockets take the machine's default, and OpenMPI has no setting for
  # it. Where the two differ, OpenMPI runs again in a network namespace of its own, once with the
  # machine's default ("tcp-ns-<default>" lines: what the namespace alone changes) and once with
  # tpuemu's choice ("tcp-ns-<choice>"): the
  # like-for-like comparison (docs/benchmarks.md, "congestion control"). Needs root.
  cc=${TPUEMU_PEER_TCP_CONGESTION:-cubic}
  default_cc=$(cat /proc/sys/net/ipv4/tcp_congestion_control)
  if [[ "$cc" != system && "$cc" != "$default_cc" ]]; then
    ns="tpuemu-bench-$$"
    if [[ $EUID -eq 0 ]] && command -v ip >/dev/null && ip netns add "$ns" 2>/dev/null; then
      # A namespace other than the machine's takes only the congestion controls the machine
      # allows (net.ipv4.tcp_allowed_congestion_control): the choice joins them for this run.
      allowed=$(cat /proc/sys/net/ipv4/tcp_allowed_congestion_control)
      restore="ip netns del $ns 2>/dev/null || true"
      if [[ " $allowed " != *" $cc "* ]] && sysctl -qw net.ipv4.tcp_allowed_congestion_control="$allowed $cc"; then
        restore="$restore; sysctl -qw net.ipv4.tcp_allowed_congestion_control='$allowed'"
      fi
      trap "$restore" EXIT
      ip -n "$ns" link set lo up
      for c in "$default_cc" "$cc"; do
        { ip netns exec "$ns" sysctl -qw net.ipv4.tcp_congestion_control="$c" &&
          ip netns exec "$ns" env OMPI_MCA_plm_rsh_agent= "${MPIRUN[@]}" --mca btl tcp,self \
            --mca btl_tcp_if_include lo ./build/bin/mpi_collectives "tcp-ns-$c"; } ||
          echo "(OpenMPI in a network namespace with $c: failed)"
      done
    else
      echo "(OpenMPI with $cc, like tpuemu's links: needs root and a network namespace of its own; skipped)"
    fi
  fi
fi
