// A LLaMA-style model's shape, as the planner reasons about it: how many
// parameters of each kind, and what a step multiplies and keeps. Presets for
// published models; a YAML file picks one (`model:`) and overrides keys with
// MaxText's names.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tpuemu {

struct ModelShape {
  std::string name;
  int64_t layers = 0;      // base_num_decoder_layers (L)
  int64_t emb_dim = 0;     // base_emb_dim (D)
  int64_t mlp_dim = 0;     // base_mlp_dim (F)
  int64_t query_heads = 0; // base_num_query_heads (N)
  int64_t kv_heads = 0;    // base_num_kv_heads (K)
  int64_t head_dim = 0;    // head_dim (H)
  int64_t vocab = 0;       // vocab_size (V)
  int64_t seq_len = 0;     // max_target_length (T)
  // Gated MLP: two up-projections and one down (seed 001's 3LDF); 2 for the
  // seed's simplified block (one up, one down).
  int mlp_matrices = 3;

  double MlpParams() const;        // mlp_matrices x L D F
  double AttentionParams() const;  // L (2 D N H + 2 D K H): query and output, key and value
  double VocabParams() const;      // 2 V D: embedding and the vocabulary projection
  double Params() const;
};

std::vector<std::string> ModelPresetNames();
absl::StatusOr<ModelShape> ModelPreset(const std::string& name);

// `model: PRESET` and any of the shape's keys (MaxText's names), or the keys
// alone; errors name the key, the value and what is allowed.
absl::StatusOr<ModelShape> ParseModelYaml(const std::string& text, const std::string& source);
// Every size the formulas need is given (a whole transformer: attention,
// vocabulary and sequence included), and the key-value heads divide the
// query heads.
absl::Status CheckModelShape(const ModelShape& shape, const std::string& source);
// A preset's name, or a YAML file's path.
absl::StatusOr<ModelShape> LoadModel(const std::string& preset_or_path);
inline constexpr size_t kMaxModelFileBytes = size_t{1} << 20;

}  // namespace tpuemu
