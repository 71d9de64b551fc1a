// A bench program's positional arguments: numbers in a range, or the
// program's usage and exit 2 (0 for --help), so that a typo never runs a
// sweep nobody asked for, nor prints 0 as if it had been measured.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace tpuemu {

class BenchArgs {
 public:
  // `usage`: the program's one-line form and what it prints. Exits on -h or
  // --help anywhere, and on more than `most` arguments.
  BenchArgs(int argc, char** argv, std::string usage, int most) : argc_(argc), argv_(argv), usage_(std::move(usage)) {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "-h" || a == "--help") Exit(0, "");
    }
    if (argc - 1 > most) Exit(2, "too many arguments");
  }

  bool Has(int i) const { return i < argc_; }
  std::string Text(int i) const { return Has(i) ? argv_[i] : ""; }

  // The i-th argument (1-based), a whole number from lo to hi; `fallback`
  // when it is absent.
  int64_t Whole(int i, const char* name, int64_t fallback, int64_t lo, int64_t hi) const {
    if (!Has(i)) return fallback;
    int64_t v = 0;
    if (!absl::SimpleAtoi(argv_[i], &v) || v < lo || v > hi) Exit(2, Range(name, argv_[i], lo, hi));
    return v;
  }
  double Number(int i, const char* name, double fallback, double lo, double hi) const {
    if (!Has(i)) return fallback;
    double v = 0;
    if (!absl::SimpleAtod(argv_[i], &v) || !(v >= lo && v <= hi)) Exit(2, Range(name, argv_[i], lo, hi));
    return v;
  }
  // A comma-separated list of whole numbers, each from lo to hi.
  std::vector<int64_t> WholeList(int i, const char* name, std::vector<int64_t> fallback, int64_t lo,
                                 int64_t hi) const {
    if (!Has(i)) return fallback;
    std::vector<int64_t> out;
    for (absl::string_view part : absl::StrSplit(argv_[i], ',')) {
      int64_t v = 0;
      if (!absl::SimpleAtoi(part, &v) || v < lo || v > hi) Exit(2, Range(name, std::string(part), lo, hi));
      out.push_back(v);
    }
    return out;
  }

  [[noreturn]] void Exit(int code, const std::string& why) const {
    if (!why.empty()) std::fprintf(stderr, "%s: %s\n", argv_[0], why.c_str());
    std::fprintf(code == 0 ? stdout : stderr, "usage: %s\n", usage_.c_str());
    std::exit(code);
  }

 private:
  template <class T>
  static std::string Range(const char* name, const std::string& text, T lo, T hi) {
    return std::string(name) + " '" + text + "': give a number from " + Shown(lo) + " to " + Shown(hi);
  }
  static std::string Shown(int64_t v) { return std::to_string(v); }
  static std::string Shown(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
  }

  int argc_;
  char** argv_;
  std::string usage_;
};

}  // namespace tpuemu
