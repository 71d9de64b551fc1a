// A parsed matmul expression bound to sizes and to the pod's axes, and
// checked: every later stage may assume a well-formed problem.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/matmul/expr.h"
#include "core/pod/topology.h"

namespace tpuemu {

// Mesh names (single letters) bound to physical axes: X=x, Y=y, D=dcn.
struct MeshAxis {
  char name = 'X';
  Axis axis = Axis::kX;
  int size = 1;
};

class Mesh {
 public:
  // `spec` is "" (X->x, Y->y, Z->z for every axis of the pod longer than 1)
  // or "NAME=axis,...".
  static absl::StatusOr<Mesh> Create(const std::string& spec, const Topology& topo);
  const MeshAxis* Find(char name) const;
  const std::vector<MeshAxis>& axes() const { return axes_; }
  // Product of the sizes of a string of mesh letters.
  int Size(const std::string& letters) const;
  std::vector<Axis> Physical(const std::string& letters) const;
  std::string Describe() const;  // "X=x(4), Y=y(2)"

 private:
  std::vector<MeshAxis> axes_;
};

// One operand or the output: dimension names, global sizes, sharding.
struct TensorSpec {
  std::string name;
  std::vector<std::string> dims;
  std::vector<int64_t> sizes;
  std::vector<std::string> axes;  // per dim, mesh letters (most significant first)
  std::string unreduced;          // output only

  int Find(const std::string& dim) const;  // -1 if absent
  int64_t elements() const;
  std::string Notation() const;
};

struct MatmulProblem {
  std::string text;
  Mesh mesh;
  TensorSpec a, b, out;
  std::vector<std::string> contract;  // shared dimensions, in A's order
};

// `dims` is "I=1024,J=512,..."; "A.J=..." sets one operand's size only.
absl::StatusOr<MatmulProblem> BindMatmul(const MatmulExpr& expr, const std::string& dims, const Mesh& mesh);

}  // namespace tpuemu
