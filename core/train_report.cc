#include "core/train_report.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace tpuemu {

std::vector<MemoryItem> ChipMemory(const TrainConfig& c, const TrainMesh& mesh) {
  const double d = c.emb_dim, f = c.mlp_dim, l = c.num_layers, dtype = c.dtype_bytes;
  const double fsdp = mesh.size(MeshAxisKind::kFsdp), tensor = mesh.size(MeshAxisKind::kTensor);
  const double batch = static_cast<double>(c.global_batch_tokens) / (mesh.size(MeshAxisKind::kData) * fsdp);
  const double params = 2 * l * d * f / (fsdp * tensor);
  std::vector<MemoryItem> items = {
      {"parameters", params * dtype},
      {"gradients", params * dtype},
      {"optimizer state", c.opt_type == "adam" ? params * 8 : 0},
      // Saved for the backward pass: each layer's gathered input and pre-activation.
      {"activations", l * batch * (d + f / tensor) * dtype},
      // FSDP: one layer's Win and Wout gathered over fsdp (two with prefetch).
      {"gathered weights", fsdp > 1 ? (c.fsdp_prefetch ? 2 : 1) * 2 * d * f / tensor * dtype : 0},
  };
  return items;
}

double ChipHostBytes(const TrainConfig& c, const TrainMesh& mesh) {
  const double d = c.emb_dim, f = c.mlp_dim, l = c.num_layers;
  const double fsdp = mesh.size(MeshAxisKind::kFsdp), tensor = mesh.size(MeshAxisKind::kTensor);
  const double batch = static_cast<double>(c.global_batch_tokens) / (mesh.size(MeshAxisKind::kData) * fsdp);
  const double shard = 2 * l * d * f / (fsdp * tensor);
  const double copies = c.opt_type == "adam" ? 4 : 2;  // weights, gradients (, two moments)
  const double gathered = fsdp > 1 ? (c.fsdp_prefetch ? 4 : 2) * d * f / tensor : 0;
  return 4 * (2 * l * d * f + copies * shard + l * batch * (d + 2 * f / tensor) + gathered + 4 * batch * d);
}

double ChipHbmBytes(const TrainConfig& c, const Topology& topo) {
  return c.hbm_bytes > 0 ? c.hbm_bytes : topo.profile().hbm_bytes;
}

absl::Status CheckMemory(const TrainConfig& c, const TrainMesh& mesh, const Topology& topo) {
  std::vector<MemoryItem> items = ChipMemory(c, mesh);
  double total = 0;
  for (const MemoryItem& m : items) total += m.bytes;
  const double hbm = ChipHbmBytes(c, topo);
  if (total <= hbm) return absl::OkStatus();
  std::sort(items.begin(), items.end(), [](const MemoryItem& a, const MemoryItem& b) { return a.bytes > b.bytes; });
  std::vector<std::string> lines;
  for (const MemoryItem& m : items) {
    if (m.bytes > 0) lines.push_back(absl::StrFormat("  %-17s %10.3f GiB", m.name, m.bytes / (1 << 30)));
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: out of memory: each chip needs %.3f GiB but has %.3f GiB of HBM (%s). Largest items per chip:\n%s\n"
      "Shard more (fsdp or tensor parallelism), shrink global_batch_tokens, or set hbm_bytes.",
      c.name, total / (1 << 30), hbm / (1 << 30), c.hbm_bytes > 0 ? "hbm_bytes" : topo.profile().name,
      absl::StrJoin(lines, "\n")));
}

double StepModelFlops(const TrainConfig& c) {
  return 3.0 * 2 * 2.0 * c.global_batch_tokens * c.emb_dim * c.mlp_dim * c.num_layers;
}

StepReport SummarizeStep(const TrainConfig& c, const Topology& topo, const std::vector<ChipRunResult>& chips) {
  StepReport r;
  double loss_sum = 0;
  for (const ChipRunResult& chip : chips) {
    r.step = chip.step;
    loss_sum += chip.loss_sum;
    if (chip.emulated_s >= r.emulated_s) {
      r.emulated_s = chip.emulated_s;
      r.compute_s = chip.compute_s;
      for (int k = 0; k < 3; ++k) {
        r.exposed_comm_s[k] = chip.mesh_comm_s[k];
        r.comm_s[k] = chip.mesh_busy_s[k];
        r.compute_parts_s[k] = chip.compute_parts_s[k];
      }
    }
    r.wall_s = std::max(r.wall_s, chip.wall_s);
    r.host_lag_s = std::max(r.host_lag_s, chip.host_lag_s);
    uint64_t total = 0;
    for (int k = 0; k < 3; ++k) {
      r.comm_bytes[k] = std::max(r.comm_bytes[k], chip.mesh_bytes[k]);
      total += chip.mesh_bytes[k];
    }
    r.comm_bytes_total = std::max(r.comm_bytes_total, total);
  }
  r.loss = loss_sum / static_cast<double>(c.global_batch_tokens * c.emb_dim);
  const double tokens = static_cast<double>(c.global_batch_tokens);
  if (r.emulated_s > 0) {
    r.mfu = StepModelFlops(c) / (topo.num_chips() * topo.profile().flops_bf16 * r.emulated_s);
    r.tokens_per_s_emulated = tokens / r.emulated_s;
  }
  if (r.wall_s > 0) r.tokens_per_s_wall = tokens / r.wall_s;
  return r;
}

std::vector<LayerCost> PerLayerCosts(const TrainConfig& c, const TrainMesh& mesh, const Topology& topo,
                                     const StepReport& step) {
  const double d = c.emb_dim, f = c.mlp_dim, layers = c.num_layers, dtype = c.dtype_bytes;
  const double data = mesh.size(MeshAxisKind::kData), fsdp = mesh.size(MeshAxisKind::kFsdp),
               tensor = mesh.size(MeshAxisKind::kTensor);
  const double batch = static_cast<double>(c.global_batch_tokens) / (data * fsdp);
  // The bidirectional bandwidth a chip has on a logical axis: both
  // directions of each of its physical axes (the seed's n_axes speed-up).
  auto bandwidth = [&](MeshAxisKind k) {
    double w = 0;
    for (Axis a : mesh.axes(k)) w += 2 * topo.Link(a).bw_dir;
    return w;
  };
  struct Row {
    MeshAxisKind kind;
    double ways;
    const char* formula;
    double bytes;  // per layer per chip, the seed's table with (N-1)/N
  };
  const Row rows[] = {
      {MeshAxisKind::kData, data, "DP: 8 D F/(T Z) (N-1)/N", 4 * dtype * d * f / (tensor * fsdp) * (data - 1) / data},
      {MeshAxisKind::kFsdp, fsdp, "FSDP: 12 D F/T (N-1)/N", 6 * dtype * d * f / tensor * (fsdp - 1) / fsdp},
      {MeshAxisKind::kTensor, tensor, "TP: 8 B D (N-1)/N", 4 * dtype * batch * d * (tensor - 1) / tensor},
  };
  std::vector<LayerCost> out;
  for (const Row& r : rows) {
    if (r.ways <= 1) continue;
    const int k = static_cast<int>(r.kind);
    out.push_back({MeshAxisName(r.kind), r.formula, r.bytes, step.comm_bytes[k] / layers, r.bytes / bandwidth(r.kind),
                   step.comm_s[k] / layers});
  }
  const double flops = 12 * batch * d * f / tensor;  // 2 matmuls forward, 4 backward
  out.push_back({"compute", "12 B D F/T flops / C", 0, 0, flops / topo.profile().flops_bf16,
                 (step.compute_parts_s[0] + step.compute_parts_s[1]) / layers});
  return out;
}

}  // namespace tpuemu
