#include "core/matmul/expr.h"

#include <cctype>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tpuemu {
namespace {

constexpr char kGrammar[] =
    "write OPERAND[DIM, ...] * OPERAND[DIM, ...] -> OUTPUT[DIM, ...], where DIM is a name, optionally "
    "sharded as NAME_AXES (I_X, I_XY), and the output may end in {U_AXES}";

class Parser {
 public:
  explicit Parser(const std::string& text) : text_(text) {}

  absl::StatusOr<MatmulExpr> Parse() {
    MatmulExpr expr;
    expr.text = text_;
    if (auto s = Tensor(expr.a, "first operand"); !s.ok()) return s;
    SkipSpace();
    if (!Eat('*')) return Error(absl::StrCat("expected '*' after ", expr.a.name, "[...]"));
    if (auto s = Tensor(expr.b, "second operand"); !s.ok()) return s;
    if (auto s = NewName(expr.b, {&expr.a}); !s.ok()) return s;
    SkipSpace();
    if (!(Peek() == '-' && pos_ + 1 < Size() && text_[pos_ + 1] == '>')) {
      return Error(absl::StrCat("expected '->' and the output after ", expr.b.name, "[...]"));
    }
    pos_ += 2;
    if (auto s = Tensor(expr.out, "output"); !s.ok()) return s;
    if (auto s = NewName(expr.out, {&expr.a, &expr.b}); !s.ok()) return s;
    SkipSpace();
    if (Peek() == '{') {
      if (auto s = Unreduced(expr.out); !s.ok()) return s;
      SkipSpace();
    }
    if (pos_ != Size()) return Error("unexpected text after the output (only {U_AXES} may follow it)");
    return expr;
  }

 private:
  int Size() const { return static_cast<int>(text_.size()); }
  char Peek() const { return pos_ < Size() ? text_[pos_] : '\0'; }
  void SkipSpace() {
    while (pos_ < Size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool Eat(char c) {
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }
  absl::Status Error(const std::string& what) const { return ExprError(text_, pos_, what); }

  // Each tensor has a name of its own: --dims A.J=8 and the reports name
  // tensors by it.
  absl::Status NewName(const ExprTensor& t, std::initializer_list<const ExprTensor*> before) const {
    for (const ExprTensor* other : before) {
      if (other->name == t.name) {
        return ExprError(text_, t.pos, absl::StrCat("'", t.name, "' names two tensors; give each its own name, as in "
                                                                 "A[I, J] * B[J, K] -> C[I, K]"));
      }
    }
    return absl::OkStatus();
  }

  // A letter, then letters or digits.
  bool Name(std::string& out) {
    if (!std::isalpha(static_cast<unsigned char>(Peek()))) return false;
    const int start = pos_;
    while (std::isalnum(static_cast<unsigned char>(Peek()))) ++pos_;
    out = text_.substr(start, pos_ - start);
    return true;
  }

  // One or more single-letter mesh axes right after '_'.
  absl::Status Axes(std::string& out, int& at) {
    at = pos_;
    while (std::isalpha(static_cast<unsigned char>(Peek()))) out += text_[pos_++];
    if (out.empty()) return Error("expected mesh axes after '_' (single letters, most significant first: X, XY)");
    return absl::OkStatus();
  }

  absl::Status Tensor(ExprTensor& t, const char* what) {
    SkipSpace();
    t.pos = pos_;
    if (!Name(t.name)) {
      return Error(absl::StrCat("expected the ", what, "'s name (a letter, then letters or digits); ", kGrammar));
    }
    SkipSpace();
    if (!Eat('[')) return Error(absl::StrCat("expected '[' after '", t.name, "'"));
    while (true) {
      SkipSpace();
      ExprDim d;
      d.pos = pos_;
      if (!Name(d.name)) return Error("expected a dimension name (a letter, then letters or digits)");
      if (Eat('_')) {
        if (auto s = Axes(d.axes, d.axes_pos); !s.ok()) return s;
      }
      t.dims.push_back(d);
      SkipSpace();
      if (Eat(']')) return absl::OkStatus();
      if (!Eat(',')) return Error(absl::StrCat("expected ',' or ']' after dimension '", d.name, "'"));
    }
  }

  // {U_X}, {U_XY} or {U_X, U_Y}.
  absl::Status Unreduced(ExprTensor& t) {
    ++pos_;
    while (true) {
      SkipSpace();
      if (!(Eat('U') && Eat('_'))) return Error("expected U_AXES inside {...}, as in {U_X} or {U_XY}");
      std::string axes;
      int at = 0;
      if (auto s = Axes(axes, at); !s.ok()) return s;
      if (t.unreduced_pos < 0) t.unreduced_pos = at;
      t.unreduced += axes;
      SkipSpace();
      if (Eat('}')) return absl::OkStatus();
      if (!Eat(',')) return Error("expected ',' or '}' after the unreduced axes");
    }
  }

  const std::string& text_;
  int pos_ = 0;
};

}  // namespace

absl::Status ExprError(const std::string& text, int pos, const std::string& what) {
  // The caret lines up under the text only if nothing before it is wider
  // than one column; control characters are shown as spaces for that reason.
  std::string shown = text;
  for (char& c : shown) {
    if (std::iscntrl(static_cast<unsigned char>(c))) c = ' ';
  }
  return absl::InvalidArgumentError(
      absl::StrCat("matmul expression: ", what, "\n  ", shown, "\n  ", std::string(std::max(pos, 0), ' '), "^"));
}

std::string TensorNotation(const std::string& name, const std::vector<std::string>& dims,
                           const std::vector<std::string>& axes, const std::string& unreduced) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < dims.size(); ++i) {
    parts.push_back(axes[i].empty() ? dims[i] : absl::StrCat(dims[i], "_", axes[i]));
  }
  return absl::StrCat(name, "[", absl::StrJoin(parts, ", "), "]", unreduced.empty() ? "" : "{U_", unreduced,
                      unreduced.empty() ? "" : "}");
}

absl::StatusOr<MatmulExpr> ParseMatmulExpr(const std::string& text) { return Parser(text).Parse(); }

}  // namespace tpuemu
