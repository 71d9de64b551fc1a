// The seeds' sharded-matmul notation, parsed: `A[I_X, J] * B[J, K_Y] -> C[I_X, K_Y]`,
// multi-axis subscripts (`I_XY`, X major), unreduced results (`C[I, K]{U_X}`).
// Pure syntax: positions are kept so that later checks (mesh, sizes) can
// point a caret at the offending character too.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tpuemu {

struct ExprDim {
  std::string name;
  std::string axes;  // mesh axis letters, most significant first; "" = replicated
  int pos = 0;       // offset of the name in the text
  int axes_pos = 0;  // offset of the first axis letter
};

struct ExprTensor {
  std::string name;
  int pos = 0;
  std::vector<ExprDim> dims;
  std::string unreduced;  // output only: axes of {U_...}
  int unreduced_pos = -1;
};

struct MatmulExpr {
  std::string text;
  ExprTensor a, b, out;
};

absl::StatusOr<MatmulExpr> ParseMatmulExpr(const std::string& text);

// "matmul expression: <what>\n  <text>\n  <spaces>^" as an InvalidArgument error.
absl::Status ExprError(const std::string& text, int pos, const std::string& what);

// "A[I_X, J]", "C[I, K]{U_X}".
std::string TensorNotation(const std::string& name, const std::vector<std::string>& dims,
                           const std::vector<std::string>& axes, const std::string& unreduced = "");

}  // namespace tpuemu
