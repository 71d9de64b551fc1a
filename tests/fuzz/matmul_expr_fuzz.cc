// libFuzzer target: the matmul notation's parser, binder and planner on
// arbitrary input. Input: expression, dimension sizes and mesh on three
// lines. Anything may be refused with an error; nothing may crash, hang,
// overflow or leak.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/matmul/spec.h"

namespace {

const tpuemu::Topology& Pod() {
  static const tpuemu::Topology topo = *tpuemu::Topology::Create({"v5p:2x4", 2, 4, "auto"});
  return topo;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  tpuemu::MatmulSpec spec;
  const size_t first = input.find('\n');
  spec.expr = input.substr(0, first);
  if (first != std::string::npos) {
    const size_t second = input.find('\n', first + 1);
    spec.dims = input.substr(first + 1, second == std::string::npos ? std::string::npos : second - first - 1);
    if (second != std::string::npos) spec.mesh = input.substr(second + 1);
  }
  auto plan = tpuemu::PlanMatmulSpec(spec, Pod());
  if (plan.ok() && plan->candidates.empty()) __builtin_trap();  // a plan always has a chosen candidate
  return 0;
}
