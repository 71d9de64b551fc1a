// Small YAML files of one flat map (a chip profile, a model's shape), read
// with every refusal as a message rather than a yaml-cpp exception, and the
// one check every YAML file of ours needs (one document).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "yaml-cpp/yaml.h"

namespace tpuemu {

// The line (from 1) where a second YAML document's content starts, or 0.
// YAML::Load reads only the first and leaves the rest unread, silently.
int SecondYamlDocumentLine(const std::string& text);

// What yaml-cpp's refusal of `text` means for a flat file: its own message
// ("illegal map value" at the end of a line) does not say that the line, or
// the one before it, is indented as if nested. Empty when neither is.
std::string IndentedLineHint(const std::string& text, const YAML::Exception& e);

// `text` as one map whose keys are words and whose values are single words or
// numbers, no key twice, all of it UTF-8. `source` starts every message.
absl::StatusOr<YAML::Node> LoadFlatYamlMap(const std::string& text, const std::string& source);

// A whole number written in decimal (an optional sign, then digits), or an
// error saying what is wrong with `text`: not a number, too large for 64
// bits (OutOfRange), or a leading zero (YAML, and yaml-cpp's as<int>, read
// 010 as the octal 8).
absl::StatusOr<int64_t> DecimalInteger(const std::string& text);

}  // namespace tpuemu
