// Whether text is valid UTF-8: what protobuf's string fields and JSON
// output require of a job file's words (a name, a topology), checked where
// the file is read so that a bad byte is refused by key rather than
// breaking a message or an output later.
#pragma once

#include <string>
#include <string_view>

namespace tpuemu {

bool IsValidUtf8(std::string_view text);

// `text` with each byte that is not part of valid UTF-8, and each control
// character (a newline, an escape), written as \xHH: a name from outside
// (a file's) safe in a protobuf string, a JSON document and a terminal.
std::string PrintableText(std::string_view text);

}  // namespace tpuemu
