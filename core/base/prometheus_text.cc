#include "core/base/prometheus_text.h"

#include <charconv>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace tpuemu {
namespace {

std::string Escaped(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

// The shortest text that reads back as the same double: a scrape carries
// the figures the job's results carry, to the last bit.
std::string PrometheusNumber(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char text[32];
  return std::string(text, std::to_chars(text, text + sizeof(text), v).ptr);
}

void WriteMetricHeader(std::string& out, const std::string& name, const std::string& type, const std::string& help) {
  absl::StrAppend(&out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

void WriteSample(std::string& out, const std::string& name, const std::vector<std::pair<std::string, std::string>>& labels,
                 double value) {
  out += name;
  if (!labels.empty()) {
    out += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      absl::StrAppend(&out, i ? "," : "", labels[i].first, "=\"", Escaped(labels[i].second), "\"");
    }
    out += '}';
  }
  absl::StrAppend(&out, " ", PrometheusNumber(value), "\n");
}

}  // namespace tpuemu
