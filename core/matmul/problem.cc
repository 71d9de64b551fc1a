#include "core/matmul/problem.h"

#include <algorithm>
#include <set>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/base/field.h"

namespace tpuemu {
namespace {

// The tensor of an expression with everything we learn while binding it.
struct Bound {
  const ExprTensor* expr;
  TensorSpec spec;
};

absl::Status CheckAxes(const MatmulExpr& e, const ExprTensor& t, const Mesh& mesh) {
  std::map<char, std::string> used;  // axis -> where it was first used
  auto use = [&](char c, int pos, const std::string& where) -> absl::Status {
    if (mesh.Find(c) == nullptr) {
      return ExprError(e.text, pos,
                       absl::StrCat("axis ", std::string(1, c), " is not in the mesh (", mesh.Describe(),
                                    "); bind it with ", Field("mesh"), " ", std::string(1, c), "=x|y|z|dcn"));
    }
    auto [it, fresh] = used.emplace(c, where);
    if (!fresh) {
      return ExprError(e.text, pos,
                       absl::StrCat("forbidden sharding: axis ", std::string(1, c), " is used twice in ", t.name,
                                    " (", it->second, " and ", where,
                                    "); a mesh axis may shard at most one dimension of a tensor, once"));
    }
    return absl::OkStatus();
  };
  for (const ExprDim& d : t.dims) {
    for (size_t i = 0; i < d.axes.size(); ++i) {
      if (auto s = use(d.axes[i], d.axes_pos + static_cast<int>(i), d.name); !s.ok()) return s;
    }
  }
  for (size_t i = 0; i < t.unreduced.size(); ++i) {
    if (auto s = use(t.unreduced[i], t.unreduced_pos + static_cast<int>(i), "{U_...}"); !s.ok()) return s;
  }
  std::set<std::string> names;
  for (const ExprDim& d : t.dims) {
    if (!names.insert(d.name).second) {
      return ExprError(e.text, d.pos, absl::StrCat("dimension ", d.name, " appears twice in ", t.name));
    }
  }
  return absl::OkStatus();
}

const ExprDim& DimOf(const ExprTensor& t, const std::string& name) {
  return *std::find_if(t.dims.begin(), t.dims.end(), [&](const ExprDim& d) { return d.name == name; });
}

bool Has(const ExprTensor& t, const std::string& name) {
  return std::any_of(t.dims.begin(), t.dims.end(), [&](const ExprDim& d) { return d.name == name; });
}

// A flag's comma-separated entries, each trimmed. An empty one is refused
// rather than skipped: "I=64,,J=64" is more likely a lost entry than a typo.
absl::StatusOr<std::vector<std::string>> CommaEntries(const std::string& csv, absl::string_view field,
                                                      absl::string_view example) {
  std::vector<std::string> out;
  for (absl::string_view item : absl::StrSplit(csv, ',')) {
    item = absl::StripAsciiWhitespace(item);
    if (item.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(Field(field), " '", csv, "': entry ", out.size() + 1,
                                                     " is empty; separate the entries with single commas (example: ",
                                                     Field(field), " ", example, ")"));
    }
    out.emplace_back(item);
  }
  return out;
}

absl::StatusOr<std::map<std::string, int64_t>> ParseDims(const std::string& csv) {
  std::map<std::string, int64_t> out;
  auto items = CommaEntries(csv, "dims", "I=1024,J=512,K=2048");
  if (!items.ok()) return items.status();
  for (const std::string& item : *items) {
    std::vector<std::string> kv = absl::StrSplit(item, '=');
    int64_t v = 0;
    if (kv.size() != 2 || kv[0].empty() || !absl::SimpleAtoi(kv[1], &v) || v <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          Field("dims"), ": '", item, "' is not NAME=SIZE with a positive integer size (example: ", Field("dims"),
          " I=1024,J=512,K=2048)"));
    }
    if (!out.emplace(kv[0], v).second) {
      return absl::InvalidArgumentError(absl::StrCat(Field("dims"), ": ", kv[0], " is given twice"));
    }
  }
  return out;
}

// Free dimensions before contracting ones or after them, never interleaved:
// then each operand's local block is a strided matrix BLIS can read directly.
bool Grouped(const ExprTensor& t, const std::set<std::string>& contract) {
  int changes = 0;
  for (size_t i = 1; i < t.dims.size(); ++i) {
    changes += contract.count(t.dims[i].name) != contract.count(t.dims[i - 1].name);
  }
  return changes <= 1;
}

std::vector<std::string> Filter(const ExprTensor& t, const std::set<std::string>& contract, bool want_contract) {
  std::vector<std::string> out;
  for (const ExprDim& d : t.dims) {
    if (static_cast<bool>(contract.count(d.name)) == want_contract) out.push_back(d.name);
  }
  return out;
}

}  // namespace

absl::StatusOr<Mesh> Mesh::Create(const std::string& spec, const Topology& topo) {
  Mesh mesh;
  if (spec.empty()) {
    const std::pair<char, Axis> defaults[] = {{'X', Axis::kX}, {'Y', Axis::kY}, {'Z', Axis::kZ}};
    for (auto [name, axis] : defaults) {
      if (topo.AxisSize(axis) > 1) mesh.axes_.push_back({name, axis, topo.AxisSize(axis)});
    }
    return mesh;
  }
  auto items = CommaEntries(spec, "mesh", "X=x,Y=y,D=dcn");
  if (!items.ok()) return items.status();
  for (const std::string& item : *items) {
    std::vector<std::string> kv = absl::StrSplit(item, '=');
    if (kv.size() != 2 || kv[0].size() != 1 || !std::isalpha(static_cast<unsigned char>(kv[0][0]))) {
      return absl::InvalidArgumentError(absl::StrCat(
          Field("mesh"), ": '", item, "' is not NAME=AXIS with a one-letter name (example: ", Field("mesh"),
          " X=x,Y=y,D=dcn)"));
    }
    auto axis = ParseAxis(kv[1]);
    if (!axis.ok()) return absl::InvalidArgumentError(absl::StrCat(Field("mesh"), ": ", item, ": ", axis.status().message()));
    if (topo.AxisSize(*axis) < 2) {
      return absl::InvalidArgumentError(absl::StrCat(Field("mesh"), ": ", item, ": the pod (", topo.Describe(),
                                                     ") has no axis ", kv[1], " longer than 1"));
    }
    for (const MeshAxis& m : mesh.axes_) {
      if (m.name == kv[0][0] || m.axis == *axis) {
        return absl::InvalidArgumentError(
            absl::StrCat(Field("mesh"), ": ", item, " repeats a name or a physical axis already bound in '", spec, "'"));
      }
    }
    mesh.axes_.push_back({kv[0][0], *axis, topo.AxisSize(*axis)});
  }
  return mesh;
}

const MeshAxis* Mesh::Find(char name) const {
  for (const MeshAxis& m : axes_) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

int Mesh::Size(const std::string& letters) const {
  int n = 1;
  for (char c : letters) n *= Find(c)->size;
  return n;
}

std::vector<Axis> Mesh::Physical(const std::string& letters) const {
  std::vector<Axis> out;
  for (char c : letters) out.push_back(Find(c)->axis);
  return out;
}

std::string Mesh::Describe() const {
  if (axes_.empty()) return "no axes";
  std::vector<std::string> parts;
  for (const MeshAxis& m : axes_) parts.push_back(absl::StrCat(std::string(1, m.name), "=", AxisName(m.axis), "(", m.size, ")"));
  return absl::StrJoin(parts, ", ");
}

int TensorSpec::Find(const std::string& dim) const {
  auto it = std::find(dims.begin(), dims.end(), dim);
  return it == dims.end() ? -1 : static_cast<int>(it - dims.begin());
}

int64_t TensorSpec::elements() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

std::string TensorSpec::Notation() const { return TensorNotation(name, dims, axes, unreduced); }

absl::StatusOr<MatmulProblem> BindMatmul(const MatmulExpr& e, const std::string& dims_csv, const Mesh& mesh) {
  for (const ExprTensor* t : {&e.a, &e.b, &e.out}) {
    if (auto s = CheckAxes(e, *t, mesh); !s.ok()) return s;
  }
  if (!e.a.unreduced.empty() || !e.b.unreduced.empty()) {
    return ExprError(e.text, e.a.pos, "only the output may be unreduced");
  }
  std::set<std::string> contract;
  for (const ExprDim& d : e.a.dims) {
    if (Has(e.b, d.name)) contract.insert(d.name);
  }
  if (contract.empty()) {
    return ExprError(e.text, e.b.pos,
                     absl::StrCat(e.a.name, " and ", e.b.name,
                                  " share no dimension, so nothing is contracted; name the contracting dimension the "
                                  "same in both (A[I, J] * B[J, K])"));
  }
  for (const ExprDim& d : e.out.dims) {
    if (contract.count(d.name)) {
      return ExprError(e.text, d.pos,
                       absl::StrCat("dimension ", d.name, " is in both operands and in the output (a batch dimension); "
                                    "a matmul here contracts every dimension its operands share"));
    }
    if (!Has(e.a, d.name) && !Has(e.b, d.name)) {
      return ExprError(e.text, d.pos,
                       absl::StrCat("output dimension ", d.name, " is in neither ", e.a.name, " nor ", e.b.name));
    }
  }
  for (const ExprTensor* t : {&e.a, &e.b}) {
    for (const ExprDim& d : t->dims) {
      if (!contract.count(d.name) && !Has(e.out, d.name)) {
        return ExprError(e.text, d.pos,
                         absl::StrCat("dimension ", d.name, " of ", t->name,
                                      " is not contracted (the other operand lacks it) and not in the output; add it "
                                      "to ", e.out.name));
      }
    }
  }

  // Layout: [free..., contract...] or [contract..., free...]; the same
  // contracting order in both operands; output = free(A) free(B) or reversed.
  const std::vector<std::string> ca = Filter(e.a, contract, true), cb = Filter(e.b, contract, true);
  const std::vector<std::string> fa = Filter(e.a, contract, false), fb = Filter(e.b, contract, false);
  for (const ExprTensor* t : {&e.a, &e.b}) {
    if (!Grouped(*t, contract)) {
      return ExprError(e.text, t->pos,
                       absl::StrCat(t->name, " interleaves contracted and kept dimensions; put its contracted ones (",
                                    absl::StrJoin(ca, ", "), ") together, first or last"));
    }
  }
  if (ca != cb) {
    return ExprError(e.text, e.b.pos,
                     absl::StrCat("the contracted dimensions must come in the same order in both operands (",
                                  absl::StrJoin(ca, ", "), " in ", e.a.name, ")"));
  }
  std::vector<std::string> out_dims, ab = fa, ba = fb;
  for (const ExprDim& d : e.out.dims) out_dims.push_back(d.name);
  ab.insert(ab.end(), fb.begin(), fb.end());
  ba.insert(ba.end(), fa.begin(), fa.end());
  if (out_dims != ab && out_dims != ba) {
    return ExprError(e.text, e.out.pos,
                     absl::StrCat("the output must list ", e.a.name, "'s kept dimensions then ", e.b.name,
                                  "'s, or the reverse: ", e.out.name, "[", absl::StrJoin(ab, ", "), "] or ",
                                  e.out.name, "[", absl::StrJoin(ba, ", "), "]"));
  }

  // Sizes: "T.D" for one tensor, "D" for all.
  auto given = ParseDims(dims_csv);
  if (!given.ok()) return given.status();
  std::set<std::string> used;
  MatmulProblem p;
  p.text = e.text;
  p.mesh = mesh;
  p.contract = ca;
  for (auto [t, spec] : {std::pair{&e.a, &p.a}, {&e.b, &p.b}, {&e.out, &p.out}}) {
    spec->name = t->name;
    spec->unreduced = t->unreduced;
    for (const ExprDim& d : t->dims) {
      std::string key = absl::StrCat(t->name, ".", d.name);
      auto it = given->find(key);
      if (it == given->end()) it = given->find(key = d.name);
      if (it == given->end()) {
        return ExprError(e.text, d.pos,
                         absl::StrCat("no size for dimension ", d.name, "; give it with ", Field("dims"), " ", d.name, "=SIZE"));
      }
      used.insert(key);
      const int parts = mesh.Size(d.axes);
      if (it->second % parts != 0) {
        return ExprError(e.text, d.pos,
                         absl::StrCat("dimension ", d.name, " of ", t->name, " has size ", it->second,
                                      ", which does not split evenly over ", d.axes, " (", parts,
                                      " shards); use a multiple of ", parts));
      }
      spec->dims.push_back(d.name);
      spec->sizes.push_back(it->second);
      spec->axes.push_back(d.axes);
    }
  }
  for (const auto& [key, _] : *given) {
    if (!used.count(key)) {
      return absl::InvalidArgumentError(absl::StrCat(Field("dims"), ": ", key, " names no dimension of '", e.text, "'"));
    }
  }
  // Every count downstream (elements, bytes, 2 I J K flops) must fit in 64 bits.
  constexpr int kMaxLog2 = 60;
  unsigned __int128 work = 1;
  std::vector<std::string> names;
  for (const TensorSpec* t : {&p.a, &p.b}) {
    for (size_t d = 0; d < t->dims.size(); ++d) {
      if (std::find(names.begin(), names.end(), t->dims[d]) != names.end()) continue;
      names.push_back(t->dims[d]);
      if (work <= (static_cast<unsigned __int128>(1) << kMaxLog2)) work *= t->sizes[d];
    }
  }
  if (work > (static_cast<unsigned __int128>(1) << kMaxLog2)) {
    return absl::InvalidArgumentError(absl::StrCat(Field("dims"), " '", dims_csv, "': the product of the dimension sizes (",
                                                   absl::StrJoin(names, " x "), ") exceeds 2^", kMaxLog2,
                                                   "; use smaller sizes"));
  }
  for (const std::string& d : ca) {
    const int64_t sa = p.a.sizes[p.a.Find(d)], sb = p.b.sizes[p.b.Find(d)];
    if (sa != sb) {
      return ExprError(e.text, DimOf(e.b, d).pos,
                       absl::StrCat("contracting dimension ", d, " has size ", sa, " in ", e.a.name, " but ", sb,
                                    " in ", e.b.name, "; they must match"));
    }
  }
  for (size_t i = 0; i < p.out.dims.size(); ++i) {
    const TensorSpec& src = p.a.Find(p.out.dims[i]) >= 0 ? p.a : p.b;
    const int64_t s = src.sizes[src.Find(p.out.dims[i])];
    if (p.out.sizes[i] != s) {
      return ExprError(e.text, e.out.dims[i].pos,
                       absl::StrCat("output dimension ", p.out.dims[i], " has size ", p.out.sizes[i], " but ",
                                    p.out.dims[i], " of ", src.name, " has size ", s));
    }
  }
  return p;
}

}  // namespace tpuemu
