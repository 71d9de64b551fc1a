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

TEST(UnitsTest, FormatsSizesToReadInTheLargestUnitTheyReach) {
  EXPECT_EQ(FormatSize(1), "1 B");  // an hbm_bytes of 1 was shown as "0.000 GiB"
  EXPECT_EQ(FormatSize(1023), "1023 B");
  EXPECT_EQ(FormatSize(1024), "1 KiB");
  EXPECT_EQ(FormatSize(0.375 * (1 << 30)), "384 MiB");
  EXPECT_EQ(FormatSize(1e8), "95.37 MiB");
  EXPECT_EQ(FormatSize(96.0 * (1ULL << 30)), "96 GiB");
}

TEST(UnitsTest, RejectsNonsenseWithTheFieldName) {
  for (const char* bad : {"", "0", "-1", "12XB", "MiB", "2TiB", "1.5MiB"}) {
    auto v = ParseBytes(bad, "--bytes");
    ASSERT_FALSE(v.ok()) << bad;
    EXPECT_NE(v.status().message().find("--bytes"), std::string::npos);
  }
}

TEST(UnitsTest, ParsesTimesInSecondsOrWithAUnit) {
  EXPECT_EQ(*ParseDuration("3", "--heartbeat-timeout", absl::Hours(1)), absl::Seconds(3));
  EXPECT_EQ(*ParseDuration("0.5", "--heartbeat-timeout", absl::Hours(1)), absl::Milliseconds(500));
  EXPECT_EQ(*ParseDuration("500ms", "--heartbeat-timeout", absl::Hours(1)), absl::Milliseconds(500));
  EXPECT_EQ(*ParseDuration("2m", "--heartbeat-timeout", absl::Hours(1)), absl::Minutes(2));
  EXPECT_EQ(*ParseDuration("1h", "--heartbeat-timeout", absl::Hours(1)), absl::Hours(1));
}

TEST(UnitsTest, RefusesTimesNotAboveZeroTooLongOrNotTimesNamingFieldValueAndRange) {
  for (const char* bad : {"", "0", "0s", "-1", "-3s", "abc", "3x", "nan", "inf", "1e400", "61m"}) {
    auto v = ParseDuration(bad, "TPUEMU_HEARTBEAT_TIMEOUT", absl::Hours(1));
    ASSERT_FALSE(v.ok()) << bad;
    const std::string m(v.status().message());
    EXPECT_NE(m.find(std::string("TPUEMU_HEARTBEAT_TIMEOUT '") + bad + "'"), std::string::npos) << m;
    EXPECT_NE(m.find("above 0 and at most 1h"), std::string::npos) << m;
  }
  // The examples it gives are within the limit: a fault's extra latency is
  // at most 1s, and "30s, 2m" were offered for it.
  const std::string m(ParseDuration("5s", "--slow-link extra latency", absl::Seconds(1)).status().message());
  EXPECT_NE(m.find("at most 1s, in seconds (0.5, 0.02) or with a unit (500ms, 20ms)"), std::string::npos) << m;
}

}  // namespace
}  // namespace tpuemu
