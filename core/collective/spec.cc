#include "core/collective/spec.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/base/field.h"

namespace tpuemu {

std::string OpName(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllGather: return "all-gather";
    case CollectiveOp::kReduceScatter: return "reduce-scatter";
    case CollectiveOp::kAllReduce: return "all-reduce";
    case CollectiveOp::kAllToAll: return "all-to-all";
  }
  return "?";
}

absl::StatusOr<CollectiveOp> ParseOp(const std::string& name) {
  for (auto op : {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter, CollectiveOp::kAllReduce,
                  CollectiveOp::kAllToAll}) {
    if (OpName(op) == name) return op;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      Field("op"), " '", name, "': unknown collective; allowed: all-gather, reduce-scatter, all-reduce, all-to-all"));
}

std::string AlgorithmName(RingAlgorithm alg) {
  switch (alg) {
    case RingAlgorithm::kAuto: return "auto";
    case RingAlgorithm::kUniRing: return "uni-ring";
    case RingAlgorithm::kBiRing: return "bi-ring";
    case RingAlgorithm::kLine: return "line";
  }
  return "?";
}

absl::StatusOr<RingAlgorithm> ParseAlgorithm(const std::string& name) {
  for (auto alg : {RingAlgorithm::kAuto, RingAlgorithm::kUniRing, RingAlgorithm::kBiRing, RingAlgorithm::kLine}) {
    if (AlgorithmName(alg) == name) return alg;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(Field("algorithm"), " '", name, "': unknown algorithm; allowed: auto, uni-ring, bi-ring, line"));
}

absl::StatusOr<std::vector<Axis>> ParseAxes(const std::string& csv) {
  std::vector<Axis> axes;
  std::set<Axis> seen;
  for (const auto& part : absl::StrSplit(csv, ',')) {
    auto axis = ParseAxis(std::string(part));
    if (!axis.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(Field("axes"), " '", csv, "': unknown axis '", part, "'; allowed: x, y, z, dcn (comma-separated)"));
    }
    if (!seen.insert(*axis).second) {
      return absl::InvalidArgumentError(absl::StrCat(Field("axes"), " '", csv, "': axis '", part, "' is listed twice"));
    }
    axes.push_back(*axis);
  }
  return axes;
}

std::string AxesName(const std::vector<Axis>& axes) {
  std::string s;
  for (size_t i = 0; i < axes.size(); ++i) s += (i ? "," : "") + AxisName(axes[i]);
  return s;
}

}  // namespace tpuemu
