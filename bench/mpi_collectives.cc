// OpenMPI doing the same collectives as bench/datapath_bench on the same
// machine, for comparison: n ranks, f32 arrays of 1, 8 and 64 MiB, busbw in
// nccl-tests terms (AllToAll sized by one rank's buffer). Run with mpirun;
// choose the transport with --mca btl tcp,self or --mca btl vader,self.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const char* label = argc > 1 ? argv[1] : "mpi";
  const char* ops[] = {"all-reduce", "all-gather", "reduce-scatter", "all-to-all"};
  const size_t sizes[] = {1u << 20, 8u << 20, 64u << 20};
  for (const char* op : ops) {
    for (size_t bytes : sizes) {
      const size_t count = bytes / sizeof(float);  // the full array V
      std::vector<float> in(count, 1.0f), out(count, 0.0f);
      double best = 1e30;
      for (int rep = 0; rep < 4; ++rep) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        if (!std::strcmp(op, "all-reduce")) {
          MPI_Allreduce(in.data(), out.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        } else if (!std::strcmp(op, "all-gather")) {
          MPI_Allgather(in.data(), count / n, MPI_FLOAT, out.data(), count / n, MPI_FLOAT, MPI_COMM_WORLD);
        } else if (!std::strcmp(op, "reduce-scatter")) {
          MPI_Reduce_scatter_block(in.data(), out.data(), count / n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        } else {  // every rank holds V / n, a block of V / n^2 for each peer
          MPI_Alltoall(in.data(), count / n / n, MPI_FLOAT, out.data(), count / n / n, MPI_FLOAT, MPI_COMM_WORLD);
        }
        double t = MPI_Wtime() - t0, slowest = 0;
        MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (rep > 0) best = std::min(best, slowest);  // rep 0 warms up
      }
      const bool a2a = !std::strcmp(op, "all-to-all");
      const double size = a2a ? static_cast<double>(bytes) / n : static_cast<double>(bytes);
      const double factor = (!std::strcmp(op, "all-reduce") ? 2.0 : 1.0) * (n - 1) / n;
      if (rank == 0) {
        std::printf("%-8s %-15s %5zuM busbw %7.3f GB/s\n", label, op, bytes >> 20, size / best / 1e9 * factor);
      }
    }
  }
  MPI_Finalize();
  return 0;
}
