// A training job file (DESIGN §6, issue 4): flat YAML with MaxText's key
// names where the concept is the same. Every key is described once, in
// TrainKeys(), which also feeds `tpuemu submit --help` and docs/jobs.md. The
// CLI reads a file into a TrainConfig once; from there the job travels typed
// (tpuemu.v1.TrainConfig) and is checked again, never parsed again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/pod/faults.h"
#include "core/pod/topology.h"

namespace tpuemu {

struct TrainKey {
  std::string name;
  std::string type;        // "int", "number", "string", "bool"
  std::string default_text;
  std::string doc;
};
const std::vector<TrainKey>& TrainKeys();

// Data, fsdp, tensor and pipeline parallelism of one level (ICI inside a
// slice, DCN across slices); -1 is "whatever is left", as in MaxText.
struct Parallelism {
  int data = 1;
  int fsdp = 1;
  int tensor = 1;
  int pipeline = 1;
  int product() const { return data * fsdp * tensor * pipeline; }
  bool operator==(const Parallelism&) const = default;
};

struct TrainConfig {
  std::string name;
  std::string topology;  // optional: the pod's slice shape, or a block of it (core/train/pod_part.h)
  int num_slices = 0;    // 0: all of the pod's
  int num_chips = 0;     // 0: all the slices hold
  Parallelism ici{1, -1, 1, 1};
  Parallelism dcn{-1, 1, 1, 1};
  int64_t emb_dim = 0;              // D
  int64_t mlp_dim = 0;              // F
  int num_layers = 1;               // L
  int64_t global_batch_tokens = 0;  // B
  int steps = 1;
  uint64_t seed = 0;
  std::string opt_type = "adam";    // adam | sgd
  double learning_rate = 1e-3;
  double adam_b1 = 0.9;
  double adam_b2 = 0.95;
  double adam_eps = 1e-8;
  std::string activation = "gelu";  // relu | gelu | silu | tanh | linear
  // LLaMA's gated MLP (MaxText's mlp_activations: [silu, linear]): a second
  // up-projection Wup beside Win, multiplied into the activation:
  // (act(x Win) * (x Wup)) Wout, seed 001's 3 L D F parameters.
  bool gated_mlp = false;
  // What a layer keeps for its backward pass (MaxText's remat_policy):
  // "none" keeps the gathered input, the pre-activation (and a gated MLP's
  // up-projection); "full" keeps only the layer's input shard and computes
  // the rest again in the backward pass (charged: the tensor axis' gather
  // and the forward matmuls once more).
  std::string remat_policy = "none";  // none | full
  // Causal self-attention before the MLP (issue 19; MaxText's keys): query,
  // key, value and output projections with grouped key-value heads. No query
  // heads: no attention (seed 001's block). Sequences of seq_len rows: the
  // batch is sharded by whole sequences.
  int num_query_heads = 0;  // base_num_query_heads
  int num_kv_heads = 0;     // base_num_kv_heads (a file's default: the query heads)
  int64_t head_dim = 0;     // (a file's default: emb_dim / query heads)
  int64_t seq_len = 0;      // max_target_length
  // Token ids in, a vocabulary-parallel cross-entropy out (issue 19): an
  // embedding E [V, D] before the first block and a vocabulary projection
  // Wv [D, V] after the last, the loss over V split across the tensor axis.
  // 0: seed 001's block alone, its input random vectors and its loss the
  // mean squared error against a teacher.
  int64_t vocab_size = 0;
  int dtype_bytes = 2;              // emulated: bf16 (2) | f32 (4)
  int wire_dtype_bytes = 4;         // what crosses links: f32 (4) | bf16 (2)
  double time_scale = -1;           // -1: whatever the pod runs at
  bool fsdp_prefetch = false;
  double hbm_bytes = 0;             // 0: the chip preset's
  // Pipelining (issue 5). Microbatches: -1 until ResolveMesh makes it one
  // per stage. Each stage holds `pipeline_repeats` groups of layers.
  int num_microbatches = -1;
  int pipeline_repeats = 1;
  std::string pipeline_schedule = "gpipe";  // gpipe | 1f1b | circular
  bool pipeline_fsdp_ag_once = false;
  // Checkpoints and restarts (issue 16): every chip's state written every
  // `checkpoint_every` steps (0: never); after a worker is lost the job
  // resumes from the latest complete one, at most `max_restarts` times.
  int checkpoint_every = 0;
  int max_restarts = 0;
  // Faults on purpose (issue 17, core/pod/faults.h): slow links and
  // stragglers, in the job's own chip numbers.
  Faults faults;
  // Shape-only runs (issue 19): "none" moves no payload and multiplies
  // nothing; every chip runs the same program on tensors that have shapes but
  // no values, and both clocks advance exactly as with "real" values.
  std::string values = "real";  // real | none

  bool shape_only() const { return values == "none"; }
  int mlp_matrices() const { return gated_mlp ? 3 : 2; }
  bool attention() const { return num_query_heads > 0; }
  bool embeddings() const { return vocab_size > 0; }
  // Whether anything reads the first layer MLP's input gradient: attention
  // or the embedding before it. When nothing does, the host skips making it
  // (the emulated chip is still charged for it).
  bool first_mlp_input_gradient_read() const { return attention() || embeddings(); }
  // What the loss is a mean over: tokens (the cross-entropy), or elements
  // of the output (the squared error against the teacher).
  double loss_elements() const {
    return static_cast<double>(global_batch_tokens) * (embeddings() ? 1 : static_cast<double>(emb_dim));
  }
  // The embedding's and the vocabulary projection's parameters, 2 V D.
  double EmbeddingParams() const { return 2.0 * static_cast<double>(vocab_size) * static_cast<double>(emb_dim); }
  // Matrices of one block: the MLP's, and attention's four (model.h's BlockMatrices).
  int block_matrices() const { return mlp_matrices() + (attention() ? 4 : 0); }
  int64_t q_width() const { return num_query_heads * head_dim; }  // Wq's columns, Wo's rows
  int64_t kv_width() const { return num_kv_heads * head_dim; }     // Wk's and Wv's columns
  // Parameters of one block: the MLP's k D F and attention's D (2 N H + 2 K H).
  double LayerParams() const {
    return static_cast<double>(emb_dim) * (mlp_matrices() * static_cast<double>(mlp_dim) +
                                           2.0 * static_cast<double>(q_width() + kv_width()));
  }
  bool full_remat() const { return remat_policy == "full"; }
  int stages() const { return ici.pipeline * dcn.pipeline; }  // after ResolveMesh
  bool operator==(const TrainConfig&) const = default;
};

// Largest job file anyone reads: real ones are a few hundred bytes of flat
// keys, so anything near this is a wrong file. No string in a config may be
// longer either, so a typed job stays as small as its file could be.
inline constexpr size_t kMaxJobFileBytes = size_t{1} << 20;

// Parses a job file's text and checks it (ValidateTrainConfig). `source`
// names it in errors. `shape_only`: as values: none, whatever the file says
// (`tpuemu simulate`), checked as such.
absl::StatusOr<TrainConfig> ParseTrainConfig(const std::string& yaml_text, const std::string& source,
                                             bool shape_only = false);

// Checks every key's value (ranges, allowed names, the combinations and the
// one-device reference's memory), with the error a job file with that value
// gets: the parser's last step, and the first of a service given a config
// over the wire, which trusts no client. The -1s and 0s meaning "the pod's"
// pass; ResolveMesh fills them in.
absl::Status ValidateTrainConfig(const TrainConfig& config, const std::string& source);

// Fills in the -1s for a pod and checks the products and divisibility.
absl::Status ResolveMesh(TrainConfig& config, const Topology& topo);

}  // namespace tpuemu
