#include "core/train/config.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <map>
#include <utility>
#include <variant>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/base/flat_yaml.h"
#include "core/base/utf8.h"
#include "core/plan/model_shape.h"
#include "core/pod/pod_config.h"
#include "core/train/pod_part.h"
#include "yaml-cpp/yaml.h"

namespace tpuemu {
namespace {

// Host memory the one-device reference may use, so that a typo in a size
// is an error rather than an exhausted machine.
constexpr double kMaxReferenceBytes = 8.0 * (1ull << 30);

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

absl::Status KeyError(const std::string& source, const std::string& key, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", key, ": ", what));
}

// Fills the -1 of one level and checks the product.
absl::Status Resolve(Parallelism& p, int total, const std::string& level, const std::string& what,
                     const std::string& source) {
  int* fields[] = {&p.data, &p.fsdp, &p.tensor, &p.pipeline};
  int* fill = nullptr;
  int known = 1;
  for (int i = 0; i < 4; ++i) {
    if (*fields[i] == -1) {
      if (fill != nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(source, ": only one of ", level,
                                                       "_{data,fsdp,tensor,pipeline}_parallelism may be -1"));
      }
      fill = fields[i];
    } else {
      known *= *fields[i];
    }
  }
  const std::string given = absl::StrCat(level, "_data_parallelism=", p.data, ", ", level, "_fsdp_parallelism=",
                                         p.fsdp, ", ", level, "_tensor_parallelism=", p.tensor, ", ", level,
                                         "_pipeline_parallelism=", p.pipeline);
  if (fill != nullptr) {
    if (total % known != 0) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": ", given, ": the product of the others (", known,
                                                     ") must divide ", what, " (", total, ")"));
    }
    *fill = total / known;
  } else if (known != total) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", given, ": the product is ", known, " but must be ",
                                                   what, " (", total, "); set one of them to -1 to fill in"));
  }
  return absl::OkStatus();
}

// Stages, microbatches and repeats: what the schedules need of them.
absl::Status ResolvePipeline(TrainConfig& c, int64_t batch_ways) {
  const std::string& source = c.name;
  if (c.ici.pipeline > 1 && c.dcn.pipeline > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": ici_pipeline_parallelism=", c.ici.pipeline, ", dcn_pipeline_parallelism=", c.dcn.pipeline,
        ": pipeline stages lie on one physical axis, inside a slice or across slices; set one of them to 1"));
  }
  const int stages = c.stages();
  if (c.num_microbatches == -1) c.num_microbatches = stages;
  const int64_t groups = int64_t{stages} * c.pipeline_repeats;
  if (c.num_layers % groups != 0) {
    return KeyError(source, "num_layers",
                    absl::StrCat(c.num_layers, " layers do not split into ", stages, " stage(s) x ",
                                 c.pipeline_repeats, " repeat(s) = ", groups,
                                 " equal layer groups; use a multiple of ", groups));
  }
  if (c.pipeline_schedule == "circular" && c.num_microbatches < stages) {
    return KeyError(source, "num_pipeline_microbatches",
                    absl::StrCat(c.num_microbatches, " is fewer than the ", stages,
                                 " stages; the circular schedule needs at least one microbatch per stage (MaxText "
                                 "recommends 2 x stages)"));
  }
  const int64_t ways = batch_ways * c.num_microbatches;
  if (c.global_batch_tokens % ways != 0) {
    return KeyError(source, "global_batch_tokens",
                    absl::StrCat(c.global_batch_tokens, " does not split into ", c.num_microbatches,
                                 " microbatches over ", batch_ways, " data x fsdp shard(s); use a multiple of ",
                                 ways));
  }
  return absl::OkStatus();
}

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
// Clang before 17 does not deduce an aggregate's template arguments (C++20's P1816).
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

// Where a key's value lives in a TrainConfig. dtype and wire_dtype are
// written as names (bf16, f32) and kept as bytes.
struct Dtype {
  int* bytes;
};
using FieldRef = std::variant<int*, int64_t*, uint64_t*, double*, bool*, std::string*, Dtype>;

// Every key of TrainKeys(), in `c`.
std::map<std::string, FieldRef> Fields(TrainConfig& c) {
  return {{"name", &c.name},
          {"topology", &c.topology},
          {"num_slices", &c.num_slices},
          {"num_chips", &c.num_chips},
          {"ici_data_parallelism", &c.ici.data},
          {"ici_fsdp_parallelism", &c.ici.fsdp},
          {"ici_tensor_parallelism", &c.ici.tensor},
          {"ici_pipeline_parallelism", &c.ici.pipeline},
          {"dcn_data_parallelism", &c.dcn.data},
          {"dcn_fsdp_parallelism", &c.dcn.fsdp},
          {"dcn_tensor_parallelism", &c.dcn.tensor},
          {"dcn_pipeline_parallelism", &c.dcn.pipeline},
          {"emb_dim", &c.emb_dim},
          {"mlp_dim", &c.mlp_dim},
          {"num_layers", &c.num_layers},
          {"global_batch_tokens", &c.global_batch_tokens},
          {"steps", &c.steps},
          {"num_pipeline_microbatches", &c.num_microbatches},
          {"num_pipeline_repeats", &c.pipeline_repeats},
          {"pipeline_schedule", &c.pipeline_schedule},
          {"pipeline_fsdp_ag_once", &c.pipeline_fsdp_ag_once},
          {"seed", &c.seed},
          {"opt_type", &c.opt_type},
          {"learning_rate", &c.learning_rate},
          {"adam_b1", &c.adam_b1},
          {"adam_b2", &c.adam_b2},
          {"adam_eps", &c.adam_eps},
          {"activation", &c.activation},
          {"dtype", Dtype{&c.dtype_bytes}},
          {"wire_dtype", Dtype{&c.wire_dtype_bytes}},
          {"time_scale", &c.time_scale},
          {"fsdp_prefetch", &c.fsdp_prefetch},
          {"hbm_bytes", &c.hbm_bytes},
          {"checkpoint_every", &c.checkpoint_every},
          {"max_restarts", &c.max_restarts},
          {"values", &c.values},
          {"remat_policy", &c.remat_policy},
          {"base_num_query_heads", &c.num_query_heads},
          {"base_num_kv_heads", &c.num_kv_heads},
          {"head_dim", &c.head_dim},
          {"max_target_length", &c.seq_len},
          {"vocab_size", &c.vocab_size}};
}

constexpr std::pair<const char*, int> kDtypes[] = {{"bf16", 2}, {"f32", 4}};

std::string DtypeName(int bytes) {
  for (const auto& [name, b] : kDtypes) {
    if (b == bytes) return name;
  }
  return absl::StrCat(bytes, " bytes");
}

// What each key allows of its value, however the value arrived (read from a
// file, or typed in a request): written once, for both.
// `shown`: the value as the file wrote it (one too large for 64 bits is
// checked as the largest or least there is), else n.
absl::Status CheckInt(const std::string& source, const std::string& key, int64_t n, std::string shown = "") {
  if (shown.empty()) shown = absl::StrCat(n);
  if (key == "emb_dim" || key == "mlp_dim" || key == "global_batch_tokens") {
    if (n <= 0 || n > (int64_t{1} << 24)) return KeyError(source, key, absl::StrCat(shown, ": must be between 1 and 16777216"));
    return absl::OkStatus();
  }
  if (key == "base_num_query_heads" || key == "base_num_kv_heads" || key == "head_dim" ||
      key == "max_target_length") {  // 0: no attention, or the default
    const int64_t most = key == "max_target_length" ? (int64_t{1} << 20) : 65536;
    if (n < 0 || n > most) return KeyError(source, key, absl::StrCat(shown, ": must be between 0 and ", most));
    return absl::OkStatus();
  }
  if (key == "vocab_size") {  // 0: no embedding and no vocabulary projection
    if (n < 0 || n > (int64_t{1} << 20)) return KeyError(source, key, absl::StrCat(shown, ": must be between 0 and 1048576"));
    return absl::OkStatus();
  }
  if (key == "checkpoint_every" || key == "max_restarts") {
    const int64_t most = key == "max_restarts" ? 200 : 1000000;
    if (n < 0 || n > most) return KeyError(source, key, absl::StrCat(shown, ": must be between 0 and ", most));
    return absl::OkStatus();
  }
  const bool parallelism = key.find("parallelism") != std::string::npos || key == "num_pipeline_microbatches";
  const bool ok = parallelism ? (n == -1 || (n >= 1 && n <= 65536)) : (n >= 1 && n <= 1000000);
  if (!ok) {
    return KeyError(source, key, absl::StrCat(shown, parallelism ? ": must be -1 (the rest) or a count from 1 to 65536"
                                                             : ": must be a whole number from 1 to 1000000"));
  }
  return absl::OkStatus();
}

// `shown`: the value as the file wrote it, or as it was sent.
absl::Status CheckNumber(const std::string& source, const std::string& key, double x, const std::string& shown) {
  if (key == "learning_rate" && !(x > 0 && x < 1e3)) {
    return KeyError(source, key, absl::StrCat(shown, ": must be above 0 and below 1000"));
  }
  if ((key == "adam_b1" || key == "adam_b2") && !(x >= 0 && x < 1)) {
    return KeyError(source, key, absl::StrCat(shown, ": must be in [0, 1)"));
  }
  // Below 1: an epsilon of infinity (or of 1e300) turned every update into 0, and the job "trained".
  if (key == "adam_eps" && !(x > 0 && x < 1)) {
    return KeyError(source, key, absl::StrCat(shown, ": must be above 0 and below 1 (1e-8 by default)"));
  }
  if (key == "time_scale" && !(x >= 0 && x <= kMaxTimeScale)) {
    return KeyError(source, key, absl::StrCat(shown, ": must be from 0 to 1e9, as a pod's (0: unpaced)"));
  }
  if (key == "hbm_bytes" && !(x >= 0 && x < 1e15)) {
    return KeyError(source, key, absl::StrCat(shown, ": must be at least 0 and below 1e15"));
  }
  return absl::OkStatus();
}

absl::Status CheckWord(const std::string& source, const std::string& key, const std::string& word) {
  // No file holds a longer one; a request could.
  if (word.size() > kMaxJobFileBytes) {
    return KeyError(source, key, absl::StrCat(word.size(), " bytes; at most ", kMaxJobFileBytes, " (1 MiB)"));
  }
  if (!IsValidUtf8(word)) return KeyError(source, key, "not valid UTF-8 text: save the file as UTF-8");
  static const auto* const kAllowed = new std::map<std::string, std::vector<std::string>>{
      {"opt_type", {"adam", "sgd"}},
      {"activation", {"relu", "gelu", "silu", "tanh", "linear"}},
      {"dtype", {"bf16", "f32"}},
      {"wire_dtype", {"f32", "bf16"}},
      {"pipeline_schedule", {"gpipe", "1f1b", "circular"}},
      {"values", {"real", "none"}},
      {"remat_policy", {"none", "full"}}};
  const auto allowed = kAllowed->find(key);
  if (allowed == kAllowed->end() || absl::c_linear_search(allowed->second, word)) return absl::OkStatus();
  return KeyError(source, key, absl::StrCat("'", word, "': allowed: ", absl::StrJoin(allowed->second, ", ")));
}

// model: PRESET, its block's sizes into the config (core/plan/model_shape.h).
absl::Status ApplyModelPreset(const YAML::Node& v, const std::string& source, TrainConfig& c) {
  if (!v.IsScalar()) return KeyError(source, "model", "expected a preset's name, e.g. llama3-70b");
  auto preset = ModelPreset(v.Scalar());
  if (!preset.ok()) {
    return KeyError(source, "model",
                    absl::StrCat("'", v.Scalar(), "': allowed: ", absl::StrJoin(ModelPresetNames(), ", ")));
  }
  c.emb_dim = preset->emb_dim;
  c.mlp_dim = preset->mlp_dim;
  c.num_layers = static_cast<int>(preset->layers);
  c.gated_mlp = preset->mlp_matrices == 3;
  if (c.gated_mlp) c.activation = "silu";
  c.num_query_heads = static_cast<int>(preset->query_heads);
  c.num_kv_heads = static_cast<int>(preset->kv_heads);
  c.head_dim = preset->head_dim;
  c.seq_len = preset->seq_len;
  c.vocab_size = preset->vocab;
  return absl::OkStatus();
}

// mlp_activations: [NAME] or [NAME, linear] (a plain NAME too), into the
// config's activation and gated_mlp.
absl::Status ReadMlpActivations(const YAML::Node& v, const std::string& source, bool activation_seen,
                                TrainConfig& c) {
  const std::string key = "mlp_activations";
  if (activation_seen) return KeyError(source, key, "give the activation once: here or in activation");
  std::vector<std::string> names;
  if (v.IsScalar()) {
    names.push_back(v.Scalar());
  } else if (v.IsSequence()) {
    for (const YAML::Node& n : v) {
      if (!n.IsScalar()) return KeyError(source, key, "expected a list of names, as [silu, linear]");
      names.push_back(n.Scalar());
    }
  }
  if (names.empty() || names.size() > 2 || (names.size() == 2 && names[1] != "linear")) {
    return KeyError(source, key, "expected [NAME] (one activation) or [NAME, linear] (a gated MLP, as LLaMA's "
                                 "[silu, linear])");
  }
  if (auto s = CheckWord(source, "activation", names[0]); !s.ok()) {
    return KeyError(source, key, absl::StrCat("'", names[0], "': allowed: relu, gelu, silu, tanh, linear"));
  }
  c.activation = names[0];
  c.gated_mlp = names.size() == 2;
  return absl::OkStatus();
}

// Reads one key's scalar into its field, checked; throws YAML::Exception
// when the text is not of the key's type.
absl::Status ReadValue(const YAML::Node& v, const std::string& source, const std::string& key, FieldRef field) {
  const std::string raw = v.Scalar();
  const absl::StatusOr<int64_t> parsed = DecimalInteger(raw);
  auto integer = [&](int64_t& n) -> absl::Status {
    if (parsed.ok()) {
      n = *parsed;
      return absl::OkStatus();
    }
    if (!absl::IsOutOfRange(parsed.status())) return KeyError(source, key, std::string(parsed.status().message()));
    // Too big for 64 bits: refused by the key's own range.
    n = absl::StartsWith(raw, "-") ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
    absl::Status range = CheckInt(source, key, n, raw);
    return range.ok() ? KeyError(source, key, std::string(parsed.status().message())) : range;
  };
  return std::visit(
      Overloaded{
          [&](int* p) {
            int64_t n = 0;
            absl::Status s = integer(n);
            if (s.ok()) s = CheckInt(source, key, n);
            if (s.ok()) *p = static_cast<int>(n);  // checked: within +-1000000
            return s;
          },
          [&](int64_t* p) {
            absl::Status s = integer(*p);
            return s.ok() ? CheckInt(source, key, *p) : s;
          },
          [&](uint64_t* p) {
            if (parsed.ok() && *parsed >= 0) {
              *p = static_cast<uint64_t>(*parsed);
              return absl::OkStatus();
            }
            // Past int64's range, within uint64's (a seed).
            if (absl::IsOutOfRange(parsed.status()) && absl::SimpleAtoi(raw, p)) return absl::OkStatus();
            if (!parsed.ok() && !absl::IsOutOfRange(parsed.status())) {
              return KeyError(source, key, std::string(parsed.status().message()));
            }
            return KeyError(source, key, absl::StrCat(raw, ": must be a whole number from 0 to 18446744073709551615"));
          },
          [&](double* p) {
            if (!YAML::convert<double>::decode(v, *p)) {
              // yaml-cpp refuses a number past a double's range (1e400) as if
              // it were none: read as infinite, the key's own range names it.
              char* end = nullptr;
              errno = 0;
              *p = std::strtod(raw.c_str(), &end);
              if (raw.empty() || *end != '\0' || errno != ERANGE) {
                return KeyError(source, key, absl::StrCat("'", raw, "' is not a number"));
              }
            }
            return CheckNumber(source, key, *p, raw);
          },
          [&](bool* p) {
            if (!YAML::convert<bool>::decode(v, *p)) {
              return KeyError(source, key, absl::StrCat("'", raw, "' is not true or false"));
            }
            return absl::OkStatus();
          },
          [&](std::string* p) {
            *p = raw;
            return CheckWord(source, key, raw);
          },
          [&](Dtype d) {
            if (absl::Status s = CheckWord(source, key, raw); !s.ok()) return s;
            for (const auto& [name, bytes] : kDtypes) {
              if (raw == name) *d.bytes = bytes;
            }
            return absl::OkStatus();
          },
      },
      field);
}

// faults: a list of `slow_link: TEXT`, `straggler: TEXT`, `down_link: TEXT`
// and worker entries, in the command line's forms (core/pod/faults.h).
absl::Status ReadFaults(const YAML::Node& list, const std::string& source, Faults& faults) {
  static const char* kForm =
      "a list of entries such as '- slow_link: x@0.5', '- straggler: 3@2 from 5', '- down_link: 0->1 x+', "
      "'- kill_worker: 1 at 3' or '- pause_worker: 1 at 3 for 5s' (docs/faults.md)";
  if (!list.IsSequence()) return KeyError(source, "faults", kForm);
  if (list.size() > kMaxFaults) {
    return KeyError(source, "faults", absl::StrCat(list.size(), " entries; at most ", kMaxFaults));
  }
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node& entry = list[i];
    if (!entry.IsMap() || entry.size() != 1 || !entry.begin()->first.IsScalar() || !entry.begin()->second.IsScalar()) {
      return KeyError(source, "faults", absl::StrCat("entry ", i + 1, ": expected ", kForm));
    }
    const std::string kind = entry.begin()->first.Scalar(), text = entry.begin()->second.Scalar();
    const std::string where = absl::StrCat("faults entry ", i + 1, " ", kind);
    absl::Status s;
    if (kind == "slow_link") {
      s = ParseSlowLink(text, where, &faults.slow_links.emplace_back());
    } else if (kind == "straggler") {
      s = ParseStraggler(text, where, &faults.stragglers.emplace_back());
    } else if (kind == "down_link") {
      s = ParseDownLink(text, where, &faults.down_links.emplace_back());
    } else if (kind == "kill_worker" || kind == "pause_worker") {
      s = ParseWorkerFault(text, kind == "kill_worker", where, &faults.workers.emplace_back());
    } else {
      s = absl::InvalidArgumentError(
          absl::StrCat(where, ": unknown fault; allowed: slow_link, straggler, down_link, kill_worker, pause_worker"));
    }
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(source, ": ", s.message()));
  }
  return absl::OkStatus();
}

// A file's attention keys left out: K = N, H = D / N.
absl::Status FillAttentionDefaults(const std::string& source, TrainConfig& c) {
  if (!c.attention()) return absl::OkStatus();
  if (c.num_kv_heads == 0) c.num_kv_heads = c.num_query_heads;
  if (c.head_dim == 0) {
    if (c.emb_dim % c.num_query_heads != 0) {
      return KeyError(source, "head_dim",
                      absl::StrCat("missing, and emb_dim=", c.emb_dim, " does not split over base_num_query_heads=",
                                   c.num_query_heads, "; give head_dim"));
    }
    c.head_dim = c.emb_dim / c.num_query_heads;
  }
  return absl::OkStatus();
}

// Attention's keys agree with one another.
absl::Status CheckAttention(const TrainConfig& c, const std::string& source) {
  if (!c.attention()) {
    for (const auto& [key, value] : {std::pair<const char*, int64_t>{"base_num_kv_heads", c.num_kv_heads},
                                     {"head_dim", c.head_dim},
                                     {"max_target_length", c.seq_len}}) {
      if (value != 0) {
        return KeyError(source, key, absl::StrCat(value, " without attention: set base_num_query_heads too (or drop ",
                                                  key, ")"));
      }
    }
    return absl::OkStatus();
  }
  if (c.num_kv_heads <= 0 || c.num_query_heads % c.num_kv_heads != 0) {
    return KeyError(source, "base_num_kv_heads",
                    absl::StrCat(c.num_kv_heads, ": must divide base_num_query_heads=", c.num_query_heads,
                                 " (each key-value head serves a group of query heads)"));
  }
  if (c.head_dim <= 0) return KeyError(source, "head_dim", absl::StrCat(c.head_dim, ": must be positive"));
  if (c.seq_len <= 0) {
    return KeyError(source, "max_target_length",
                    absl::StrCat(c.seq_len == 0 ? "missing or 0" : absl::StrCat(c.seq_len),
                                 ": attention needs the sequence length (tokens per sequence), 1 or more"));
  }
  if (c.global_batch_tokens % c.seq_len != 0) {
    return KeyError(source, "global_batch_tokens",
                    absl::StrCat(c.global_batch_tokens, " is not whole sequences of max_target_length=", c.seq_len,
                                 "; use a multiple of ", c.seq_len));
  }
  return absl::OkStatus();
}

}  // namespace

const std::vector<TrainKey>& TrainKeys() {
  static const std::vector<TrainKey> keys = {
      {"name", "string", "job", "a label for the job"},
      {"topology", "string", "(the pod's)",
       "CHIP:SHAPE the job runs on in each slice: the pod's slice shape, or a block of whole hosts of it "
       "(a sub-slice), which leaves the rest to other jobs"},
      {"num_slices", "int", "(all)", "slices the job runs on, at most the pod's; fewer leave the rest to other jobs"},
      {"num_chips", "int", "(all)",
       "chips the job runs on, instead of a block: the fewest slices that hold them, and in each the first block "
       "of whole hosts that size, widest along x"},
      {"ici_data_parallelism", "int", "1", "data-parallel ways inside a slice (-1: fill in)"},
      {"ici_fsdp_parallelism", "int", "-1", "FSDP (ZeRO-3) ways inside a slice (-1: fill in)"},
      {"ici_tensor_parallelism", "int", "1", "tensor-parallel (Megatron) ways inside a slice (-1: fill in)"},
      {"ici_pipeline_parallelism", "int", "1", "pipeline stages inside a slice, on one physical axis (-1: fill in)"},
      {"dcn_data_parallelism", "int", "-1", "data-parallel ways across slices (-1: fill in)"},
      {"dcn_fsdp_parallelism", "int", "1", "FSDP ways across slices (-1: fill in)"},
      {"dcn_tensor_parallelism", "int", "1", "tensor-parallel ways across slices (-1: fill in)"},
      {"dcn_pipeline_parallelism", "int", "1", "pipeline stages across slices, one per slice (-1: fill in)"},
      {"emb_dim", "int", "(required)", "D, the model (residual stream) width (MaxText's base_emb_dim, read as this)"},
      {"mlp_dim", "int", "(required)", "F, the feed-forward width (MaxText's base_mlp_dim, read as this)"},
      {"num_layers", "int", "1",
       "L, the number of blocks (attention if any, then In*Win -> act -> *Wout; MaxText's base_num_decoder_layers, "
       "read as this)"},
      {"global_batch_tokens", "int", "(required)", "B, tokens per step across the pod"},
      {"steps", "int", "1", "training steps"},
      {"num_pipeline_microbatches", "int", "-1",
       "microbatches per step (-1: one per pipeline stage); gradients are accumulated over them"},
      {"num_pipeline_repeats", "int", "1", "layer groups per stage; above 1 needs pipeline_schedule: circular"},
      {"pipeline_schedule", "string", "gpipe", "gpipe (all forwards, then all backwards) | 1f1b | circular"},
      {"pipeline_fsdp_ag_once", "bool", "false", "gather a stage's FSDP weights once per step, not per microbatch"},
      {"seed", "int", "0", "seed of the weights, the teacher and the batches"},
      {"opt_type", "string", "adam", "optimizer: adam | sgd"},
      {"learning_rate", "number", "0.001", "step size"},
      {"adam_b1", "number", "0.9", "Adam's first-moment decay"},
      {"adam_b2", "number", "0.95", "Adam's second-moment decay"},
      {"adam_eps", "number", "1e-8", "Adam's epsilon"},
      {"activation", "string", "gelu", "the block's nonlinearity: relu | gelu | silu | tanh | linear"},
      {"dtype", "string", "bf16", "emulated dtype of parameters and activations (bytes, roofline): bf16 | f32"},
      {"wire_dtype", "string", "f32", "dtype of what crosses links: f32 (exact) | bf16 (rounded)"},
      {"time_scale", "number", "(the pod's)", "wall-clock pacing the job expects; must equal the pod's `time_scale`"},
      {"fsdp_prefetch", "bool", "false", "gather the next layer's FSDP weights during this layer's compute"},
      {"hbm_bytes", "number", "(the chip's)", "HBM per chip the memory check uses"},
      {"checkpoint_every", "int", "0",
       "write every chip's parameters and optimizer state every N steps (0: never); `tpuemu resume` continues from "
       "the latest"},
      {"max_restarts", "int", "0", "resume from the latest checkpoint by itself, up to K times, after a worker is lost"},
      {"values", "string", "real",
       "real (tensors hold numbers, the loss is computed) | none (shape-only: the same programs and clocks with no "
       "payload and no multiplies, so big models fit; no loss; docs/simulate.md)"},
      {"faults", "list", "(none)",
       "faults on purpose: '- slow_link: x@0.5' (links at a fraction of their bandwidth, +LATENCY per hop), "
       "'- straggler: 3@2' (a chip computing 2x slower), '- down_link: 0->1 x+' (a link carrying nothing), each "
       "'from STEP' and/or 'until STEP'; '- kill_worker: 1 at 3', '- pause_worker: 1 at 3 for 5s' (the job's host 1's "
       "process killed, or frozen, at step 3); docs/faults.md"},
      {"model", "string", "(none)",
       "a published model, whose keys the file's others override: llama2-7b, llama2-13b, llama3-8b, "
       "llama3-70b (emb_dim, mlp_dim, num_layers, LLaMA's gated MLP, mlp_activations: [silu, linear], "
       "attention: base_num_query_heads, base_num_kv_heads, head_dim, max_target_length, and vocab_size; "
       "base_num_query_heads: 0 drops attention, vocab_size: 0 the embedding and vocabulary projection)"},
      {"remat_policy", "string", "none",
       "what a layer keeps for its backward pass: none (its gathered input and pre-activation) | full (its input "
       "shard only: the backward pass gathers it and runs the forward matmuls again, charged; MaxText's default)"},
      {"base_num_query_heads", "int", "0",
       "Nq, attention's query heads: each block is causal self-attention (query, key, value and output "
       "projections), then the MLP; 0: no attention (seed 001's block); the tensor axis splits the heads"},
      {"base_num_kv_heads", "int", "(query heads)", "Nkv, key-value heads (grouped-query attention: Nq/Nkv query heads "
       "share one)"},
      {"head_dim", "int", "(emb_dim / Nq)", "H, each head's width"},
      {"max_target_length", "int", "(required with attention)",
       "S, tokens per sequence: attention mixes rows within a sequence, so each chip's share of a microbatch "
       "must be whole sequences"},
      {"vocab_size", "int", "0",
       "V: the batch is token ids; an embedding E [V, D] feeds the first block and a vocabulary projection "
       "Wv [D, V] with a cross-entropy loss follows the last (the tensor axis splits V: vocabulary-parallel); "
       "0: seed 001's block on random vectors, with a mean squared error against a teacher"},
      {"mlp_activations", "list", "[gelu]",
       "MaxText's: one activation, [NAME] (the block's Win -> NAME -> Wout), or a gated MLP, [NAME, linear] "
       "(LLaMA's [silu, linear]: (NAME(x Win) * (x Wup)) Wout, 3 matrices); instead of `activation`"},
      {"on_down_link", "fail|route", "fail",
       "what a collective that needs a down link does: fail, naming it, or route: a ring that wraps goes the other "
       "way round (its one-way algorithm)"},
  };
  return keys;
}

absl::StatusOr<TrainConfig> ParseTrainConfig(const std::string& text, const std::string& source, bool shape_only) {
  if (const int line = SecondYamlDocumentLine(text); line > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": line ", line, " starts a second YAML document (after `---` or `...`); a job file is one"));
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not valid YAML: ", e.what(), IndentedLineHint(text, e)));
  }
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": expected a flat map of keys (key: value per line)"));
  }
  TrainConfig c;
  const std::map<std::string, FieldRef> fields = Fields(c);
  std::map<std::string, bool> seen;
  std::map<std::string, int> written_at;  // each key the file writes: its line
  std::map<std::string, std::string> size_names;  // emb_dim, mlp_dim, num_layers: the name the file used
  // A preset first, whatever its place in the file: the other keys override it.
  if (root["model"]) {
    if (auto s = ApplyModelPreset(root["model"], source, c); !s.ok()) return s;
    seen["emb_dim"] = seen["mlp_dim"] = true;
  }
  for (const auto& kv : root) {
    if (!kv.first.IsScalar()) {
      const int line = kv.first.Mark().line;  // -1 when yaml-cpp knows no position
      return absl::InvalidArgumentError(absl::StrCat(source, line >= 0 ? absl::StrCat(": line ", line + 1) : "",
                                                     ": a key must be a plain name, not a list, map or null; every "
                                                     "key is listed in docs/jobs.md"));
    }
    // MaxText's names for the block's sizes, read as the keys they name.
    static const auto* const kAliases = new std::map<std::string, std::string>{
        {"base_emb_dim", "emb_dim"}, {"base_mlp_dim", "mlp_dim"}, {"base_num_decoder_layers", "num_layers"}};
    std::string key = kv.first.Scalar();
    const auto alias = kAliases->find(key);
    if (alias != kAliases->end()) key = alias->second;
    for (const auto& [maxtext, ours] : *kAliases) {
      // Both names, refused here; the same name twice, as any key twice, below.
      if (key != ours) continue;
      const auto [read, first] = size_names.emplace(ours, kv.first.Scalar());
      if (!first && read->second != kv.first.Scalar()) {
        return KeyError(source, kv.first.Scalar(), absl::StrCat("give ", ours, " once: as ", ours, " or as ", maxtext));
      }
    }
    const auto spec = std::find_if(TrainKeys().begin(), TrainKeys().end(),
                                   [&](const TrainKey& k) { return k.name == key; });
    if (spec == TrainKeys().end()) {
      const TrainKey* best = &TrainKeys()[0];
      for (const TrainKey& k : TrainKeys()) {
        if (EditDistance(k.name, key) < EditDistance(best->name, key)) best = &k;
      }
      return KeyError(source, key,
                      absl::StrCat("unknown key", EditDistance(best->name, key) <= 3
                                                      ? absl::StrCat(" (did you mean ", best->name, "?)")
                                                      : "",
                                   "; every key is listed in docs/jobs.md"));
    }
    // A key twice is refused, not read as the last: YAML wants keys unique,
    // and a file that says `steps` twice meant one of them.
    const int line = kv.first.Mark().line + 1;  // 0 when yaml-cpp knows no position
    if (const auto [at, first] = written_at.emplace(key, line); !first) {
      return KeyError(source, kv.first.Scalar(),
                      absl::StrCat("given twice", at->second > 0 && line > 0
                                                      ? absl::StrCat(" (lines ", at->second, " and ", line, ")")
                                                      : "",
                                   "; give it once"));
    }
    seen[key] = true;
    if (key == "faults") {
      if (auto s = ReadFaults(kv.second, source, c.faults); !s.ok()) return s;
      continue;
    }
    if (key == "model") continue;  // applied above
    if (key == "mlp_activations") {
      if (auto s = ReadMlpActivations(kv.second, source, seen.count("activation") > 0, c); !s.ok()) return s;
      continue;
    }
    if (key == "activation" && seen.count("mlp_activations")) {
      return KeyError(source, key, "give the activation once: here or in mlp_activations");
    }
    if (key == "on_down_link") {
      if (!kv.second.IsScalar()) return KeyError(source, key, "expected fail or route");
      if (auto s = ParseOnDownLink(kv.second.Scalar(), absl::StrCat(source, ": on_down_link"), &c.faults.route_around);
          !s.ok()) {
        return s;
      }
      continue;
    }
    if (!kv.second.IsScalar()) return KeyError(source, key, absl::StrCat("expected a single ", spec->type, " value"));
    try {
      if (auto s = ReadValue(kv.second, source, key, fields.at(key)); !s.ok()) return s;
    } catch (const YAML::Exception&) {
      return KeyError(source, key, absl::StrCat("'", kv.second.Scalar(), "' is not a ", spec->type));
    }
  }
  for (const char* required : {"emb_dim", "mlp_dim", "global_batch_tokens"}) {
    if (!seen[required]) return KeyError(source, required, "missing; it has no default");
  }
  if (c.name.empty()) c.name = "job";
  if (shape_only) c.values = "none";
  if (!c.attention()) {
    // base_num_query_heads: 0 over a preset drops attention, with the
    // preset's other attention keys (not the file's: those are refused).
    if (!seen["base_num_kv_heads"]) c.num_kv_heads = 0;
    if (!seen["head_dim"]) c.head_dim = 0;
    if (!seen["max_target_length"]) c.seq_len = 0;
  }
  if (auto s = FillAttentionDefaults(source, c); !s.ok()) return s;
  if (auto s = ValidateTrainConfig(c, source); !s.ok()) return s;
  return c;
}

absl::Status ValidateTrainConfig(const TrainConfig& config, const std::string& source) {
  // A file cannot leave the name empty (it becomes "job"); errors further on
  // start with it.
  if (config.name.empty()) return KeyError(source, "name", "empty; give the job a label");
  TrainConfig c = config;  // Fields() points into a config it may change
  const std::map<std::string, FieldRef> fields = Fields(c);
  for (const TrainKey& k : TrainKeys()) {
    const std::string& key = k.name;
    if (key == "faults") {  // a list, not a field: its ranges here, the pod's names at plan time
      if (auto s = CheckFaultValues(c.faults, absl::StrCat(source, ": faults")); !s.ok()) return s;
      continue;
    }
    if (key == "on_down_link") continue;  // Faults::route_around: a bool, nothing to check
    if (key == "mlp_activations") continue;  // activation and gated_mlp: checked as activation
    if (key == "model") continue;            // a preset's values, checked as their own keys
    absl::Status s = std::visit(
        Overloaded{
            // 0 slices or chips and time_scale -1 are "the pod's", which a file says by leaving the key out.
            [&](int* v) {
              const bool pods = (key == "num_slices" || key == "num_chips") && *v == 0;
              return pods ? absl::OkStatus() : CheckInt(source, key, *v);
            },
            [&](int64_t* v) { return CheckInt(source, key, *v); },
            [&](uint64_t*) { return absl::OkStatus(); },  // any seed
            [&](double* v) {
              return key == "time_scale" && *v == -1 ? absl::OkStatus()
                                                     : CheckNumber(source, key, *v, absl::StrCat(*v));
            },
            [&](bool*) { return absl::OkStatus(); },
            [&](std::string* v) { return CheckWord(source, key, *v); },
            [&](Dtype d) { return CheckWord(source, key, DtypeName(*d.bytes)); },
        },
        fields.at(key));
    if (!s.ok()) return s;
  }
  if (c.pipeline_repeats > 1 && c.pipeline_schedule != "circular") {
    return KeyError(source, "num_pipeline_repeats",
                    absl::StrCat(c.pipeline_repeats, ": several layer groups per stage need pipeline_schedule: "
                                                     "circular (it is ", c.pipeline_schedule, ")"));
  }
  if (c.shape_only() && c.checkpoint_every > 0) {
    return KeyError(source, "checkpoint_every",
                    absl::StrCat(c.checkpoint_every, ": a shape-only job (values: none) has no parameters to "
                                                     "checkpoint; drop the key or use values: real"));
  }
  if (auto s = CheckAttention(c, source); !s.ok()) return s;
  // A shape-only job holds no values: no reference, no host memory to bound.
  if (c.shape_only()) return absl::OkStatus();
  // The one-device reference holds weights, gradients, Adam moments and the
  // teacher (5 copies of each layer's parameters) and the activations of
  // every layer (attention's: its input, q, k, v, o and the probabilities).
  const double d = static_cast<double>(c.emb_dim), f = static_cast<double>(c.mlp_dim),
               b = static_cast<double>(c.global_batch_tokens), l = c.num_layers;
  const double attention =
      c.attention() ? b * (d + 2.0 * (c.q_width() + c.kv_width()) + static_cast<double>(c.num_query_heads) * c.seq_len)
                    : 0;
  // With a vocabulary: the embedding's and projection's 5 copies, and the logits and their gradient.
  const double vocab = c.embeddings() ? 5 * c.EmbeddingParams() + 2 * b * static_cast<double>(c.vocab_size) : 0;
  const double bytes =
      4 * (5 * l * c.LayerParams() + l * (b * (c.mlp_matrices() * f + d) + attention) + 4 * b * d + vocab);
  if (bytes > kMaxReferenceBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": emb_dim=", c.emb_dim, ", mlp_dim=", c.mlp_dim, ", num_layers=", c.num_layers,
        ", global_batch_tokens=", c.global_batch_tokens, c.embeddings() ? absl::StrCat(", vocab_size=", c.vocab_size) : "",
        " need ", static_cast<int64_t>(bytes / (1 << 20)),
        " MiB of host memory for the one-device reference that real values are checked against; the limit is ",
        kMaxReferenceBytes / (1 << 20),
        " MiB: make the model or the batch smaller, or give `values: none` to run it shape-only (every emulated "
        "figure, no values; `tpuemu simulate` needs no pod)"));
  }
  return absl::OkStatus();
}

absl::Status ResolveMesh(TrainConfig& c, const Topology& topo) {
  const std::string source = c.name;
  // A job on part of the pod is planned on that part (PlacedTopology), which it fills.
  auto part = TrainPodPart(c, topo);
  if (!part.ok()) return part.status();
  if (*part != PodPart{}) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": asks for part of ", topo.Describe(),
                                                   "; plan it on that part (PlacedTopology)"));
  }
  c.num_slices = topo.slices();
  if (auto s = Resolve(c.ici, topo.chips_per_slice(), "ici", "the chips per slice", source); !s.ok()) return s;
  if (auto s = Resolve(c.dcn, c.num_slices, "dcn", "the number of slices", source); !s.ok()) return s;
  const int64_t batch_ways = int64_t{c.ici.data} * c.ici.fsdp * c.dcn.data * c.dcn.fsdp;
  const int64_t fsdp_ways = int64_t{c.ici.fsdp} * c.dcn.fsdp;
  const int64_t tensor_ways = int64_t{c.ici.tensor} * c.dcn.tensor;
  auto divides = [&](const char* key, int64_t value, int64_t ways, const char* by) -> absl::Status {
    if (value % ways == 0) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", key, ": ", value, " does not split over the ", ways,
                                                   " ", by, " shards; use a multiple of ", ways));
  };
  if (auto s = divides("global_batch_tokens", c.global_batch_tokens, batch_ways, "data x fsdp"); !s.ok()) return s;
  if (auto s = ResolvePipeline(c, batch_ways); !s.ok()) return s;
  if (auto s = divides("emb_dim", c.emb_dim, fsdp_ways, "fsdp"); !s.ok()) return s;
  if (auto s = divides("mlp_dim", c.mlp_dim, tensor_ways, "tensor"); !s.ok()) return s;
  // Activations between blocks are sharded over tensor along D (Megatron).
  if (auto s = divides("emb_dim", c.emb_dim, tensor_ways, "tensor"); !s.ok()) return s;
  // The embedding and the vocabulary projection are split over tensor along V.
  if (auto s = divides("vocab_size", c.vocab_size, tensor_ways, "tensor"); !s.ok()) return s;
  if (!c.attention()) return absl::OkStatus();
  // The tensor axis splits attention by heads, keeping each group of query
  // heads with its key-value head; a chip's rows are whole sequences.
  if (c.num_kv_heads % tensor_ways != 0) {
    return KeyError(source, "base_num_kv_heads",
                    absl::StrCat(c.num_kv_heads, " does not split over the ", tensor_ways,
                                 " tensor shards: the tensor axis splits whole key-value heads (each with its group "
                                 "of query heads); use tensor parallelism that divides ", c.num_kv_heads,
                                 " (ici_tensor_parallelism x dcn_tensor_parallelism)"));
  }
  const int64_t rows = c.global_batch_tokens / (batch_ways * c.num_microbatches);
  if (rows % c.seq_len != 0) {
    return KeyError(source, "max_target_length",
                    absl::StrCat(c.seq_len, ": each chip's share of a microbatch is ", rows, " tokens (",
                                 c.global_batch_tokens, " over ", batch_ways, " data x fsdp shard(s) and ",
                                 c.num_microbatches, " microbatch(es)), not whole sequences; use a global_batch_tokens "
                                 "that is a multiple of ", batch_ways * c.num_microbatches * c.seq_len));
  }
  return absl::OkStatus();
}

}  // namespace tpuemu
