#include "core/plan/model_shape.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/bounded_file.h"
#include "core/base/flat_yaml.h"
#include "yaml-cpp/yaml.h"

namespace tpuemu {
namespace {

// Published shapes (the models' configuration files; LLaMA-2 13B's as seed 001
// lists it: L 40, D 5120, F/D 2.7, 40 heads of 128, vocabulary 32,000).
const std::map<std::string, ModelShape>& Presets() {
  static const auto* presets = new std::map<std::string, ModelShape>{
      {"llama2-7b", {"llama2-7b", 32, 4096, 11008, 32, 32, 128, 32000, 4096, 3}},
      {"llama2-13b", {"llama2-13b", 40, 5120, 13824, 40, 40, 128, 32000, 4096, 3}},
      {"llama3-8b", {"llama3-8b", 32, 4096, 14336, 32, 8, 128, 128256, 8192, 3}},
      {"llama3-70b", {"llama3-70b", 80, 8192, 28672, 64, 8, 128, 128256, 8192, 3}},
  };
  return *presets;
}

struct Key {
  const char* name;
  int64_t ModelShape::*field;
  int64_t min;
  int64_t max;  // far beyond any model planned: a typo, not a model
};

const std::vector<Key>& Keys() {
  static const auto* keys = new std::vector<Key>{
      {"base_num_decoder_layers", &ModelShape::layers, 1, 100000},
      {"base_emb_dim", &ModelShape::emb_dim, 1, 1 << 20},
      {"base_mlp_dim", &ModelShape::mlp_dim, 1, 1 << 22},
      {"base_num_query_heads", &ModelShape::query_heads, 1, 1 << 16},
      {"base_num_kv_heads", &ModelShape::kv_heads, 1, 1 << 16},
      {"head_dim", &ModelShape::head_dim, 1, 1 << 16},
      {"vocab_size", &ModelShape::vocab, 1, 1 << 24},
      {"max_target_length", &ModelShape::seq_len, 1, 1 << 24},
  };
  return *keys;
}

}  // namespace

double ModelShape::MlpParams() const {
  return static_cast<double>(mlp_matrices) * layers * emb_dim * mlp_dim;
}
double ModelShape::AttentionParams() const {
  return static_cast<double>(layers) * (2.0 * emb_dim * query_heads * head_dim + 2.0 * emb_dim * kv_heads * head_dim);
}
double ModelShape::VocabParams() const { return 2.0 * vocab * emb_dim; }
double ModelShape::Params() const { return MlpParams() + AttentionParams() + VocabParams(); }

std::vector<std::string> ModelPresetNames() {
  std::vector<std::string> names;
  for (const auto& [name, _] : Presets()) names.push_back(name);
  return names;
}

absl::StatusOr<ModelShape> ModelPreset(const std::string& name) {
  auto it = Presets().find(name);
  if (it == Presets().end()) {
    return absl::InvalidArgumentError(absl::StrCat("model '", name, "': not a preset; presets: ",
                                                   absl::StrJoin(ModelPresetNames(), ", "),
                                                   " (or give a YAML file with model: and MaxText's keys)"));
  }
  return it->second;
}

absl::StatusOr<ModelShape> ParseModelYaml(const std::string& text, const std::string& source) {
  auto loaded = LoadFlatYamlMap(text, source);
  if (!loaded.ok()) return loaded.status();
  const YAML::Node& root = *loaded;
  ModelShape shape;
  shape.name = source;
  if (root["model"]) {
    auto preset = ModelPreset(root["model"].Scalar());
    if (!preset.ok()) return absl::InvalidArgumentError(absl::StrCat(source, ": ", preset.status().message()));
    shape = *preset;
    // A preset with keys changed is no longer that model: its header names the file.
    if (root.size() > 1) shape.name = absl::StrCat(source, " (from ", preset->name, ")");
  }
  std::vector<std::string> allowed = {"model", "mlp_matrices"};
  for (const Key& k : Keys()) allowed.push_back(k.name);
  for (const auto& entry : root) {
    const std::string key = entry.first.Scalar();
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": key '", key, "' is not a model key; allowed: ", absl::StrJoin(allowed, ", ")));
    }
    if (key == "model") continue;
    auto parsed = DecimalInteger(entry.second.Scalar());
    if (!parsed.ok()) return absl::InvalidArgumentError(absl::StrCat(source, ": ", key, " ", parsed.status().message()));
    const int64_t value = *parsed;
    if (key == "mlp_matrices") {
      if (value != 2 && value != 3) {
        return absl::InvalidArgumentError(absl::StrCat(source, ": mlp_matrices ", value,
                                                       ": 3 (gated: two up-projections, one down) or 2 (seed 001's "
                                                       "block: one up, one down)"));
      }
      shape.mlp_matrices = static_cast<int>(value);
      continue;
    }
    for (const Key& k : Keys()) {
      if (key != k.name) continue;
      if (value < k.min || value > k.max) {
        return absl::InvalidArgumentError(
            absl::StrCat(source, ": ", key, " ", value, ": must be from ", k.min, " to ", k.max));
      }
      shape.*k.field = value;
    }
  }
  if (auto s = CheckModelShape(shape, source); !s.ok()) return s;
  return shape;
}

absl::Status CheckModelShape(const ModelShape& shape, const std::string& source) {
  for (const Key& k : Keys()) {
    if (shape.*k.field < k.min) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": ", k.name, " is missing: give it, or model: one of ", absl::StrJoin(ModelPresetNames(), ", ")));
    }
  }
  if (shape.query_heads % shape.kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": base_num_kv_heads ", shape.kv_heads,
                                                   " must divide base_num_query_heads ", shape.query_heads));
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelShape> LoadModel(const std::string& preset_or_path) {
  if (Presets().count(preset_or_path) > 0) return ModelPreset(preset_or_path);
  std::error_code error;
  if (std::filesystem::is_directory(preset_or_path, error)) {
    return absl::InvalidArgumentError(absl::StrCat("model '", preset_or_path, "': a directory; give a preset (",
                                                   absl::StrJoin(ModelPresetNames(), ", "), ") or a model file"));
  }
  if (std::ifstream in(preset_or_path); !in) {
    return absl::InvalidArgumentError(absl::StrCat("model '", preset_or_path, "': neither a preset (",
                                                   absl::StrJoin(ModelPresetNames(), ", "), ") nor a file that opens"));
  }
  auto text = ReadFileAtMost(preset_or_path, kMaxModelFileBytes, "model file");
  if (!text.ok()) return text.status();
  return ParseModelYaml(*text, preset_or_path);
}

}  // namespace tpuemu
