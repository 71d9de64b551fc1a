#include "core/base/utf8.h"

#include <cstdint>
#include <cstdio>

namespace tpuemu {
namespace {

// The length of the valid UTF-8 sequence at text[i], or 0 when none starts
// there.
size_t SequenceAt(std::string_view text, size_t i) {
  const auto lead = static_cast<uint8_t>(text[i]);
  // The sequence's length and the least code point it may encode (shorter
  // encodings of the same point are invalid).
  int more = 0;
  uint32_t point = 0, least = 0;
  if (lead < 0x80) {
    return 1;
  } else if ((lead & 0xE0) == 0xC0) {
    more = 1, point = lead & 0x1F, least = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    more = 2, point = lead & 0x0F, least = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    more = 3, point = lead & 0x07, least = 0x10000;
  } else {
    return 0;
  }
  if (text.size() - i <= static_cast<size_t>(more)) return 0;  // cut short
  for (int k = 1; k <= more; ++k) {
    const auto next = static_cast<uint8_t>(text[i + k]);
    if ((next & 0xC0) != 0x80) return 0;
    point = (point << 6) | (next & 0x3F);
  }
  if (point < least || point > 0x10FFFF || (point >= 0xD800 && point <= 0xDFFF)) return 0;
  return more + 1;
}

std::string Escaped(uint8_t byte) {
  char out[5];
  std::snprintf(out, sizeof(out), "\\x%02X", byte);
  return out;
}

}  // namespace

bool IsValidUtf8(std::string_view text) {
  for (size_t i = 0, n; i < text.size(); i += n) {
    if ((n = SequenceAt(text, i)) == 0) return false;
  }
  return true;
}

std::string PrintableText(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t n = SequenceAt(text, i);
    const auto byte = static_cast<uint8_t>(text[i]);
    // C0 controls, DEL and C1 controls (U+0080-U+009F, 0xC2 0x80-0x9F):
    // 0x9B alone is a terminal's control sequence introducer.
    const bool c1 = n == 2 && byte == 0xC2 && static_cast<uint8_t>(text[i + 1]) < 0xA0;
    if (c1) {
      out += Escaped(byte) + Escaped(static_cast<uint8_t>(text[i + 1]));
      i += 2;
      continue;
    }
    if (n == 0 || byte < 0x20 || byte == 0x7F) {
      out += Escaped(byte);
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

}  // namespace tpuemu
