#include "core/base/units.h"

#include "gtest/gtest.h"

namespace tpuemu {
namespace {

TEST(UnitsTest, ParsesBinaryAndDecimalSuffixes) {
  EXPECT_EQ(*ParseBytes("4096", "--bytes"), 4096u);
  EXPECT_EQ(*ParseBytes("64KiB", "--bytes"), 65536u);
  EXPECT_EQ(*ParseBytes("8MiB", "--bytes"), 8u << 20);
  EXPECT_EQ(*ParseBytes("1MB", "--bytes"), 1000000u);
  EXPECT_EQ(*ParseByteList("1KiB,2KiB", "--bytes"), (std::vector<uint64_t>{1024, 2048}));
  EXPECT_EQ(FormatBytes(64 << 20), "64MiB");
}

TEST(UnitsTest, RejectsNonsenseWithTheFieldName) {
  for (const char* bad : {"", "0", "-1", "12XB", "MiB", "2TiB", "1.5MiB"}) {
    auto v = ParseBytes(bad, "--bytes");
    ASSERT_FALSE(v.ok()) << bad;
    EXPECT_NE(v.status().message().find("--bytes"), std::string::npos);
  }
}

}  // namespace
}  // namespace tpuemu
