#include "core/base/utf8.h"

#include <string>

#include "gtest/gtest.h"

namespace tpuemu {
namespace {

TEST(Utf8Test, TakesTextAndRefusesWhatIsNotUtf8) {
  for (const std::string ok : {"", "dp-small", "v5p:2x4", "caf\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x99\x82"}) {
    EXPECT_TRUE(IsValidUtf8(ok)) << ok;
  }
  for (const std::string bad : {
           "\xff\xfe",          // never in UTF-8
           "\xc3",              // cut short
           "ab\xe2\x82",        // cut short at the end
           "\xc0\xaf",          // '/' encoded in two bytes (overlong)
           "\xe0\x80\xaf",      // overlong in three
           "\xed\xa0\x80",      // a UTF-16 surrogate
           "\xf4\x90\x80\x80",  // beyond U+10FFFF
           "\x80",              // a continuation byte first
       }) {
    EXPECT_FALSE(IsValidUtf8(bad));
    EXPECT_TRUE(IsValidUtf8(PrintableText(bad))) << PrintableText(bad);
  }
}

TEST(Utf8Test, PrintableTextEscapesBadBytesAndControlsAndKeepsTheRest) {
  EXPECT_EQ(PrintableText("j\xff.yaml"), "j\\xFF.yaml");
  EXPECT_EQ(PrintableText("we\"ird\nname\t\x1b[31mred"), "we\"ird\\x0Aname\\x09\\x1B[31mred");
  EXPECT_EQ(PrintableText("caf\xc3\xa9 \xe2\x82\xac"), "caf\xc3\xa9 \xe2\x82\xac");
  EXPECT_EQ(PrintableText("\xe2\x82"), "\\xE2\\x82");  // cut short
  EXPECT_EQ(PrintableText("a\xc2\x9b[31m"), "a\\xC2\\x9B[31m");  // C1's control sequence introducer
}

}  // namespace
}  // namespace tpuemu
