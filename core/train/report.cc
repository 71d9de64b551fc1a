#include "core/train/report.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/base/units.h"
#include "core/collective/oracle.h"
#include "core/train/pipeline_schedule.h"
#include "core/train/vocab.h"

namespace tpuemu {

namespace {

// Layers one chip holds, and microbatches whose activations it may hold at
// once (1f1b's first stage: one per stage; gpipe and circular: all).
double StageLayers(const TrainConfig& c) { return static_cast<double>(c.num_layers) / c.stages(); }
double MicrobatchesHeld(const TrainConfig& c) {
  return c.pipeline_schedule == "1f1b" ? std::min(c.stages(), c.num_microbatches) : c.num_microbatches;
}

// Elements per row attention keeps for the backward pass on a chip of
// `tensor` shards: its gathered input, q, k, v, o and the probabilities.
double AttentionHeldPerRow(const TrainConfig& c, double tensor) {
  if (!c.attention()) return 0;
  return c.emb_dim + (2.0 * (c.q_width() + c.kv_width()) + static_cast<double>(c.num_query_heads) * c.seq_len) / tensor;
}
// Elements per row a layer keeps: the MLP's gathered input, pre-activation
// and a gated MLP's up-projection, and attention's; or with full remat each
// part's input shard.
double HeldPerRow(const TrainConfig& c, double tensor) {
  const double d = c.emb_dim, f = c.mlp_dim, k = c.mlp_matrices();
  if (c.full_remat()) return (c.attention() ? 2 : 1) * d / tensor;
  return d + (k - 1) * f / tensor + AttentionHeldPerRow(c, tensor);
}

// Attention's two products per token (q k^T and p v over the sequence,
// masked half included), forward: 4 S N H.
double AttentionCoreFlopsPerToken(const TrainConfig& c) {
  return c.attention() ? 4.0 * static_cast<double>(c.seq_len) * c.q_width() : 0;
}

// The embedding's and vocabulary projection's parameters on the chip that
// holds the most of them: both without pipelining, else the first stage's E
// or the last's Wv (V D each).
double StageVocabParams(const TrainConfig& c) {
  return c.stages() > 1 ? c.EmbeddingParams() / 2 : c.EmbeddingParams();
}
// Elements per row the vocabulary projection keeps: its gathered input and the logits' gradient.
double VocabHeldPerRow(const TrainConfig& c, double tensor) {
  return c.embeddings() ? c.emb_dim + static_cast<double>(c.vocab_size) / tensor : 0;
}

}  // namespace

std::vector<MemoryItem> ChipMemory(const TrainConfig& c, const TrainMesh& mesh) {
  const double l = StageLayers(c), dtype = c.dtype_bytes;
  const double fsdp = mesh.size(MeshAxisKind::kFsdp), tensor = mesh.size(MeshAxisKind::kTensor);
  const double microbatch = static_cast<double>(c.global_batch_tokens) /
                            (mesh.size(MeshAxisKind::kData) * fsdp * c.num_microbatches);
  const double params = (l * c.LayerParams() + StageVocabParams(c)) / (fsdp * tensor);
  // FSDP: one layer's matrices gathered over fsdp (two layers' with
  // prefetch, all the stage's with pipeline_fsdp_ag_once).
  const double gathered_layers = c.pipeline_fsdp_ag_once ? l : c.fsdp_prefetch ? 2 : 1;
  std::vector<MemoryItem> items = {
      {"parameters", params * dtype},
      {"gradients", params * dtype},
      {"optimizer state", c.opt_type == "adam" ? params * 8 : 0},
      // Saved for the backward pass, for every microbatch in flight.
      // (The vocabulary projection's on the last stage, counted as if it held as many.)
      {"activations",
       MicrobatchesHeld(c) * microbatch * (l * HeldPerRow(c, tensor) + VocabHeldPerRow(c, tensor)) * dtype},
      // (And the embedding or the vocabulary projection with its layer, V D.)
      {"gathered weights",
       fsdp > 1 ? (gathered_layers * c.LayerParams() + c.EmbeddingParams() / 2) / tensor * dtype : 0},
  };
  return items;
}

double ChipHostBytes(const TrainConfig& c, const TrainMesh& mesh) {
  const double d = c.emb_dim, f = c.mlp_dim, l = StageLayers(c);
  const double fsdp = mesh.size(MeshAxisKind::kFsdp), tensor = mesh.size(MeshAxisKind::kTensor);
  const double batch = static_cast<double>(c.global_batch_tokens) / (mesh.size(MeshAxisKind::kData) * fsdp);
  const double microbatch = batch / c.num_microbatches;
  const double p = c.LayerParams();
  const double shard = (l * p + StageVocabParams(c)) / (fsdp * tensor);
  const double copies = c.opt_type == "adam" ? 4 : 2;  // weights, gradients (, two moments)
  const double gathered_layers = c.pipeline_fsdp_ag_once ? l : c.fsdp_prefetch ? 2 : 1;
  const double gathered = fsdp > 1 ? (gathered_layers * p + c.EmbeddingParams() / 2) / tensor : 0;
  // Per microbatch and layer the input, activation and its derivative (and
  // a gated MLP's up-projection), and attention's; the vocabulary
  // projection's input and logits' gradient.
  const double held = d + c.mlp_matrices() * f / tensor + AttentionHeldPerRow(c, tensor);
  return 4 * (copies * shard + MicrobatchesHeld(c) * microbatch * (l * held + VocabHeldPerRow(c, tensor)) + gathered +
              4 * batch * d);
}

double HostTeacherBytes(const TrainConfig& c) { return c.embeddings() ? 0 : 4 * c.LayerParams() * c.num_layers; }

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
    if (m.bytes > 0) lines.push_back(absl::StrFormat("  %-17s %10s", m.name, FormatSize(m.bytes)));
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: out of memory: each chip needs %s but has %s of HBM (%s). Largest items per chip:\n%s\n"
      "Shard more (fsdp or tensor parallelism), shrink global_batch_tokens, or set hbm_bytes.",
      c.name, FormatSize(total), FormatSize(hbm), c.hbm_bytes > 0 ? "hbm_bytes" : topo.profile().name,
      absl::StrJoin(lines, "\n")));
}

double StepModelFlops(const TrainConfig& c) {
  // The vocabulary projection's 6 B D V; the embedding is a lookup, no matmul.
  const double vocab = c.embeddings() ? 6.0 * c.emb_dim * static_cast<double>(c.vocab_size) : 0;
  return (3.0 * (2 * c.LayerParams() + AttentionCoreFlopsPerToken(c)) * c.num_layers + vocab) *
         static_cast<double>(c.global_batch_tokens);
}

StepReport SummarizeStep(const TrainConfig& c, const TrainMesh& mesh, const Topology& topo,
                         const std::vector<ChipRunResult>& chips) {
  StepReport r;
  double loss_sum = 0;
  for (const ChipRunResult& chip : chips) {
    r.step = chip.step;
    loss_sum += chip.loss_sum;
    if (chip.emulated_s >= r.emulated_s) {
      r.emulated_s = chip.emulated_s;
      r.compute_s = chip.compute_s;
      for (int k = 0; k < kMeshAxes; ++k) {
        r.exposed_comm_s[k] = chip.mesh_comm_s[k];
        r.comm_s[k] = chip.mesh_busy_s[k];
      }
      for (int k = 0; k < 3; ++k) r.compute_parts_s[k] = chip.compute_parts_s[k];
    }
    r.wall_s = std::max(r.wall_s, chip.wall_s);
    r.host_lag_s = std::max(r.host_lag_s, chip.host_lag_s);
    uint64_t total = 0;
    for (int k = 0; k < kMeshAxes; ++k) {
      r.comm_bytes[k] = std::max(r.comm_bytes[k], chip.mesh_bytes[k]);
      total += chip.mesh_bytes[k];
    }
    r.comm_bytes_total = std::max(r.comm_bytes_total, total);
    r.peak_activation_bytes = std::max(r.peak_activation_bytes, chip.peak_activation_bytes);
  }
  if (c.stages() > 1 && !chips.empty()) {
    // Each stage is idle while it waits for its neighbours and after its
    // last microbatch until the slowest stage is through.
    double span = 0, busy = 0;
    for (const ChipRunResult& chip : chips) {
      span = std::max(span, chip.pipeline_end_s);
      busy += chip.pipeline_busy_s;
    }
    if (span > 0) r.bubble_fraction = 1 - busy / (span * static_cast<double>(chips.size()));
    r.bubble_formula = BubbleFormula(c.stages(), c.num_microbatches, c.pipeline_repeats);
    const double microbatches = static_cast<double>(c.num_microbatches) * c.pipeline_repeats;
    r.bubble_microbatch_compute_s = (r.compute_parts_s[0] + r.compute_parts_s[1]) / microbatches;
    const double tokens = static_cast<double>(c.global_batch_tokens) /
                          (mesh.size(MeshAxisKind::kData) * mesh.size(MeshAxisKind::kFsdp)) / c.num_microbatches;
    const LinkParams hop = topo.Link(mesh.axes(MeshAxisKind::kPipeline).front());
    r.bubble_hop_s = tokens * c.emb_dim * c.dtype_bytes / mesh.size(MeshAxisKind::kTensor) / hop.bw_dir + hop.latency;
    r.bubble_with_transfers = BubbleWithTransfers(c.stages(), c.num_microbatches, c.pipeline_repeats,
                                                  r.bubble_microbatch_compute_s, r.bubble_hop_s);
  }
  // A shape-only step computes no loss: NaN, which the views show as none.
  r.loss = c.shape_only() ? std::nan("") : loss_sum / c.loss_elements();
  const double tokens = static_cast<double>(c.global_batch_tokens);
  if (r.emulated_s > 0) {
    r.mfu = StepModelFlops(c) / (topo.num_chips() * topo.profile().flops_bf16 * r.emulated_s);
    r.tokens_per_s_emulated = tokens / r.emulated_s;
  }
  if (r.wall_s > 0) r.tokens_per_s_wall = tokens / r.wall_s;
  r.faults = c.faults.ActiveAt(r.step);
  if (c.faults.route_around && !c.faults.DownAt(r.step).empty()) {
    r.faults.push_back("collectives that need a down link go the other way round their ring (on_down_link: route)");
  }
  return r;
}

std::vector<LayerCost> PerLayerCosts(const TrainConfig& c, const TrainMesh& mesh, const Topology& topo,
                                     const StepReport& step) {
  const double d = c.emb_dim, f = c.mlp_dim, layers = StageLayers(c), dtype = c.dtype_bytes;
  const double data = mesh.size(MeshAxisKind::kData), fsdp = mesh.size(MeshAxisKind::kFsdp),
               tensor = mesh.size(MeshAxisKind::kTensor), stages = mesh.stages();
  const double batch = static_cast<double>(c.global_batch_tokens) / (data * fsdp);
  const double m = c.num_microbatches;
  // The bidirectional bandwidth a chip has on a logical axis: both
  // directions of each of its physical axes (the seed's n_axes speed-up).
  auto bandwidth = [&](MeshAxisKind k) {
    double w = 0;
    for (Axis a : mesh.axes(k)) w += 2 * topo.Link(a).bw_dir;
    return w;
  };
  // FSDP gathers each of the block's matrices for every use: forward and
  // backward of each microbatch (the seed's 12 D F, with k = 2 matrices, is
  // one microbatch), or once per step; seed 001's table counts 2 bytes per
  // parameter. A block's parameters, P, are k D F (the MLP's matrices), and
  // with attention 2 D (Nq + Nkv) H more; the formulas say P then.
  const double k = c.mlp_matrices(), p = c.LayerParams();
  const double matrices = c.block_matrices();
  // "u D F" for u P without attention (P = k D F), else "u/k P".
  auto params_text = [&](double units) {
    return c.attention() ? absl::StrCat(units / k, " P") : absl::StrCat(units, " D F");
  };
  const bool once = c.pipeline_fsdp_ag_once;
  const std::string fsdp_formula =
      once ? absl::StrCat("FSDP once: ", params_text(4 * k), "/T (N-1)/N")
      : m == 1
          ? absl::StrCat("FSDP: ", params_text(6 * k), "/T (N-1)/N")
          : absl::StrCat("FSDP x M=", m, ": (", 4 * k, "M+", 2 * k, ")", c.attention() ? "/" + absl::StrCat(k) + " P" : " D F",
                         "/T (N-1)/N");
  const double gathers_per_matrix = once ? 2 : 2 * m + 1;
  // A stage sends each microbatch's activations on after each of its layer
  // groups but the last one, and gradients back before each but the first.
  const double sends = stages == 2 ? 2.0 * c.pipeline_repeats - 1 : 2.0 * c.pipeline_repeats;
  // Per part of the block (attention, the MLP): the input gathered and the
  // output reduce-scattered, forward and backward (and the input gathered
  // again with full remat).
  const double parts = c.attention() ? 2 : 1;
  const double tensor_collectives = parts * (c.full_remat() ? 5 : 4);
  // Each row's bytes are `count` collectives of `v` bytes each; their time
  // is the collective oracle's on the axis's own links (ICI, DCN, or ICI
  // then DCN, hierarchical), latency included.
  struct Collectives {
    double count, v;
  };
  struct Row {
    MeshAxisKind kind;
    double ways;
    std::string formula;
    double bytes;  // per layer per chip, the seed's table with (N-1)/N
    CollectiveOp op;
    double count, v;
    // With a vocabulary, the embedding's and projection's per step (on the
    // chip that has the most: both, or the last stage's projection).
    std::vector<Collectives> vocab = {};
  };
  const bool both = stages == 1;
  const double vd = d * static_cast<double>(c.vocab_size);
  // FSDP gathers E for each forward use, Wv for each use (or each once), and
  // reduce-scatters each gradient once.
  const double vocab_gathers = (both ? (once ? 1 : m) + 1 : 0) + (once ? 1 : 2 * m) + 1;
  const std::vector<Collectives> none;
  const Row rows[] = {
      {MeshAxisKind::kData, data, absl::StrCat("DP: ", params_text(4 * k), "/(T Z) (N-1)/N"),
       2 * dtype * p / (tensor * fsdp) * (data - 1) / data, CollectiveOp::kAllReduce, matrices,
       dtype * p / (tensor * fsdp) / matrices,
       c.embeddings() ? std::vector<Collectives>{{both ? 2.0 : 1.0, dtype * vd / (tensor * fsdp)}} : none},
      {MeshAxisKind::kFsdp, fsdp, fsdp_formula, gathers_per_matrix * dtype * p / tensor * (fsdp - 1) / fsdp,
       CollectiveOp::kAllGather, gathers_per_matrix * matrices, dtype * p / tensor / matrices,
       c.embeddings() ? std::vector<Collectives>{{vocab_gathers, dtype * vd / tensor}} : none},
      // Full remat gathers each part's input once more in the backward pass.
      // The embedding's output is reduce-scattered and its gradient gathered,
      // the projection's input gathered and its gradient reduce-scattered,
      // and the loss's statistics (kLogitStats per row and shard) gathered.
      {MeshAxisKind::kTensor, tensor,
       absl::StrCat("TP", c.full_remat() ? ", full remat" : "", ": ", 2 * tensor_collectives, " B D (N-1)/N"),
       tensor_collectives * dtype * batch * d * (tensor - 1) / tensor, CollectiveOp::kAllGather, tensor_collectives,
       dtype * batch * d,
       c.embeddings() ? std::vector<Collectives>{{both ? 4.0 : 2.0, dtype * batch * d},
                                                 {1, dtype * batch * kLogitStats * tensor}}
                      : none},
      {MeshAxisKind::kPipeline, stages, "PP: sends x 2 B D/T / layers", sends * dtype * batch * d / tensor / layers,
       CollectiveOp::kAllGather, 0, 0},
  };
  std::vector<LayerCost> out;
  for (const Row& r : rows) {
    if (r.ways <= 1) continue;
    const int k = static_cast<int>(r.kind);
    const std::vector<Axis>& axes = mesh.axes(r.kind);
    double vocab_bytes = 0;  // per step
    for (const Collectives& v : r.vocab) {
      vocab_bytes += (r.op == CollectiveOp::kAllReduce ? 2 : 1) * v.count * v.v * (r.ways - 1) / r.ways;
    }
    LayerCost cost{MeshAxisName(r.kind),
                   r.vocab.empty() ? r.formula : absl::StrCat(r.formula, " + vocabulary's / L"),
                   r.bytes + vocab_bytes / layers,
                   step.comm_bytes[k] / layers,
                   0,
                   step.comm_s[k] / layers,
                   ""};
    if (r.kind == MeshAxisKind::kPipeline) {
      // Pipeline sends go one way on one link each.
      cost.predicted_s = r.bytes / (bandwidth(r.kind) / 2);
      cost.time_formula = absl::StrCat("bytes over one ", AxesName(axes), " link");
    } else {
      // The stage's collectives go out one after the other, as the backward
      // pass frees each gradient (or needs each weight), so their hops
      // overlap: a layer's share of them all, as the emulated column is.
      cost.predicted_s = PredictAxesSeconds(topo, r.op, axes, r.v, r.count * layers) / layers;
      for (const Collectives& v : r.vocab) cost.predicted_s += PredictAxesSeconds(topo, r.op, axes, v.v, v.count) / layers;
      cost.time_formula = absl::StrCat(r.count == 1 ? "" : absl::StrCat(r.count, " x "), OpName(r.op), " of ",
                                       FormatBytes(static_cast<uint64_t>(r.v)), " on ", PredictAxesLabel(axes));
    }
    out.push_back(std::move(cost));
  }
  // The block's matmuls forward (2 P per token, and attention's 4 S Nq H),
  // twice that backward, and with full remat the forward again but for the
  // two output projections (Wout and Wo).
  const double core = AttentionCoreFlopsPerToken(c);
  const double remat = c.full_remat() ? 2 * (k - 1) * d * f + (c.attention() ? 2.0 * d * (c.q_width() + 2 * c.kv_width()) + core : 0) : 0;
  // With a vocabulary, the projection's 6 D V per token, a layer's share.
  const double vocab_flops = c.embeddings() ? 6 * d * static_cast<double>(c.vocab_size) / layers : 0;
  const double flops = (6 * p + 3 * core + remat + vocab_flops) * batch / tensor;
  const std::string vocab_text = c.embeddings() ? " + 6 D V/L" : "";
  const std::string flops_text =
      c.attention()
          ? absl::StrCat("(6 P + 12 S Nq H", c.full_remat() ? " + remat" : "", vocab_text, ") B/T flops / C")
      : c.embeddings()
          ? absl::StrCat("(", 6 * k + (c.full_remat() ? 2 * (k - 1) : 0), " D F", vocab_text, ") B/T flops / C")
          : absl::StrCat(6 * k + (c.full_remat() ? 2 * (k - 1) : 0), " B D F/T flops / C");
  out.push_back({"compute", flops_text, 0, 0, flops / topo.profile().flops_bf16,
                 (step.compute_parts_s[0] + step.compute_parts_s[1]) / layers, "flops / C"});
  return out;
}

TrainReport PreviewTraining(const TrainConfig& c, const TrainMesh& mesh, const Topology& topo) {
  TrainReport r;
  r.mesh = mesh.Describe();
  r.pipeline_schedule = c.pipeline_schedule;
  r.stages = c.stages();
  r.microbatches = c.num_microbatches;
  r.repeats = c.pipeline_repeats;
  r.memory_per_chip = ChipMemory(c, mesh);
  r.hbm_bytes = ChipHbmBytes(c, topo);
  r.model_flops_per_step = StepModelFlops(c);
  return r;
}

}  // namespace tpuemu
