// Whether text is valid UTF-8: what protobuf's string fields and JSON
// output require of a job file's words (a name, a topology), checked where
// the file is read so that a bad byte is refused by key rather than
// breaking a message or an output later.
#pragma once

#include <string_view>

namespace tpuemu {

bool IsValidUtf8(std::string_view text);

}  // namespace tpuemu
