#include "core/base/flat_yaml.h"

#include <algorithm>
#include <set>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/base/utf8.h"

namespace tpuemu {

// Found in the text, not by YAML::LoadAll: yaml-cpp 0.7's LoadAll ran without
// end, allocating, on a 193-byte fuzzer input. A document marker is `---` or
// `...` at the start of a line (alone or before a space); no value of a flat
// file can hold one there.
int SecondYamlDocumentLine(const std::string& text) {
  bool content = false, ended = false;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    absl::ConsumeSuffix(&line, "\r");
    const auto marker = [&](absl::string_view m) {
      return absl::StartsWith(line, m) && (line.size() == m.size() || line[m.size()] == ' ' || line[m.size()] == '\t');
    };
    if (marker("...")) {
      ended = ended || content;
      continue;
    }
    if (marker("---")) {
      ended = ended || content;
      line.remove_prefix(3);  // `--- key: value` starts a document with content
    }
    const size_t first = line.find_first_not_of(" \t");
    if (first == absl::string_view::npos || line[first] == '#') continue;
    if (ended) return number;
    content = true;
  }
  return 0;
}

std::string IndentedLineHint(const std::string& text, const YAML::Exception& e) {
  const std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  const int at = e.mark.is_null() ? -1 : e.mark.line;  // from 0
  for (int i = std::max(0, at - 1); i <= at && i < static_cast<int>(lines.size()); ++i) {
    const absl::string_view line = lines[i];
    const size_t first = line.find_first_not_of(" \t");
    if (first == 0 || first == absl::string_view::npos || line[first] == '#') continue;
    return absl::StrCat(" (line ", i + 1, " is indented: every key of this file starts its own line, none nested)");
  }
  return "";
}

absl::StatusOr<int64_t> DecimalInteger(const std::string& text) {
  const size_t first = !text.empty() && (text[0] == '+' || text[0] == '-') ? 1 : 0;
  if (first == text.size() || text.find_first_not_of("0123456789", first) != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not a whole number"));
  }
  if (text[first] == '0' && first + 1 < text.size()) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "': write it without the leading zero (YAML reads a "
                                                              "number with one as octal)"));
  }
  int64_t value;
  if (!absl::SimpleAtoi(text, &value)) return absl::OutOfRangeError(absl::StrCat("'", text, "' is too large"));
  return value;
}

absl::StatusOr<YAML::Node> LoadFlatYamlMap(const std::string& text, const std::string& source) {
  if (const int line = SecondYamlDocumentLine(text); line > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": line ", line, " starts a second YAML document (after `---` or `...`); the file must hold one"));
  }
  if (!IsValidUtf8(text)) return absl::InvalidArgumentError(absl::StrCat(source, ": not UTF-8 text"));
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not YAML: ", e.what(), IndentedLineHint(text, e)));
  }
  if (!root.IsMap()) return absl::InvalidArgumentError(absl::StrCat(source, ": expected `key: value` lines"));
  std::set<std::string> seen;
  for (const auto& entry : root) {
    if (!entry.first.IsScalar()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": a key must be a word, not a list, a map or empty"));
    }
    const std::string key = entry.first.Scalar();
    if (!entry.second.IsScalar()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": ", key, ": must be a single value, not a list, a map or empty"));
    }
    if (!seen.insert(key).second) return absl::InvalidArgumentError(absl::StrCat(source, ": ", key, " is given twice"));
  }
  return root;
}

}  // namespace tpuemu
