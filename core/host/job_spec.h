// What a job asks for, tagged with the name of its kind: each kind's spec
// type (CollectiveSpec, MatmulSpec, TrainSpec, or a kind a test registers)
// names its kind in `kKind`, and the registry (core/job/kinds.h) finds the
// kind by that name. Typed and validated data, never text to re-parse.
#pragma once

#include <any>
#include <string>
#include <utility>

namespace tpuemu {

template <class Spec>
concept KindSpec = requires {
  { Spec::kKind } -> std::convertible_to<std::string>;
};

class JobSpec {
 public:
  template <KindSpec Spec>
  JobSpec(Spec spec) : kind_(Spec::kKind), spec_(std::move(spec)) {}  // NOLINT: any kind's spec is a job spec

  const std::string& kind() const { return kind_; }
  // The spec, or nullptr if it is another kind's.
  template <KindSpec Spec>
  const Spec* get() const {
    return std::any_cast<Spec>(&spec_);
  }

 private:
  std::string kind_;
  std::any spec_;
};

}  // namespace tpuemu
