#include "core/pod/profile.h"

#include <fstream>

#include "core/pod/topology.h"
#include "gtest/gtest.h"

namespace tpuemu {
namespace {

std::string Write(const std::string& name, const std::string& text) {
  const std::string path = testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(ProfileTest, PresetsCarryTheSeedsNumbers) {
  auto v5p = PresetProfile("v5p");
  ASSERT_TRUE(v5p.ok());
  EXPECT_DOUBLE_EQ(v5p->flops_bf16, 4.59e14);
  EXPECT_DOUBLE_EQ(v5p->ici_bw_dir, 9e10);
  EXPECT_DOUBLE_EQ(v5p->ici_hop_latency, 1e-6);
  EXPECT_NEAR(v5p->dcn_bw_per_host_dir, 1.116e10, 1e8);
  auto v5e = PresetProfile("v5e");
  EXPECT_DOUBLE_EQ(v5e->ici_bw_dir, 4.5e10);
  EXPECT_EQ(v5e->max_torus_dims, 2);
}

TEST(ProfileTest, AFileOverridesItsBase) {
  const std::string path = Write("slow.yaml", "base: v5p\nname: v5p-slow\nici_bw_dir: 1.0e10\nwraparound: never\n");
  auto p = LoadProfileFile(path);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->name, "v5p-slow");
  EXPECT_DOUBLE_EQ(p->ici_bw_dir, 1e10);
  EXPECT_DOUBLE_EQ(p->hbm_bw, 2.8e12);
  auto topo = Topology::Create({path + ":4x4", 1, 4, "auto"});
  ASSERT_TRUE(topo.ok()) << topo.status();
  EXPECT_FALSE(topo->AxisWraps(Axis::kX));
  EXPECT_DOUBLE_EQ(topo->Link(Axis::kX).bw_dir, 1e10);
}

TEST(ProfileTest, BadFilesSayWhatIsWrong) {
  auto expect = [](const std::string& text, const std::string& needle) {
    auto p = LoadProfileFile(Write("bad.yaml", text));
    ASSERT_FALSE(p.ok()) << text;
    EXPECT_NE(p.status().message().find(needle), std::string::npos) << p.status();
  };
  expect("base: v5p\nici_bandwidth: 1\n", "unknown key 'ici_bandwidth'");
  expect("base: v5p\nhbm_bw: -1\n", "must be a number above 0, got -1");
  expect("base: v5p\nhbm_bw: .nan\n", "must be a number above 0, got .nan");
  // Each of these threw out of the loader (the CLI died of yaml-cpp's exception).
  expect("base: [v5p]\n", "base: must be a single value");
  expect("[a, b]: 1\nbase: v5p\n", "a key must be a word");
  expect("base: v9\n", "base: chip 'v9' is not a preset");
  expect("base: v5p\n---\nhbm_bw: 1\n", "line 3 starts a second YAML document");
  expect("base: v5p\nhbm_bw: 1\nhbm_bw: 2\n", "hbm_bw is given twice");
  expect("base: v5p\nhbm_bw: fast\n", "wrong type");
  expect("name: x\n", "is missing");
  expect("base: v5p\nwraparound: sometimes\n", "allowed: multiple-of-4");
}

TEST(ProfileTest, AProfileFileThatIsNotThereIsSaidToBeMissing) {
  // A file named without a directory was called "not a preset" before.
  for (const std::string chip : {"/nonexistent/chip.yaml", "chip.yaml", "chip.yml"}) {
    auto topo = Topology::Create({chip + ":4x4", 1, 4, "auto"});
    ASSERT_FALSE(topo.ok()) << chip;
    EXPECT_NE(topo.status().message().find("profile file '" + chip + "': no such file"), std::string::npos)
        << topo.status();
  }
  auto dir = LoadProfileFile(testing::TempDir());
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.status().message().find("not a regular file"), std::string::npos) << dir.status();
  auto typo = Topology::Create({"v5x:4x4", 1, 4, "auto"});
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.status().message().find("chip 'v5x' is not a preset"), std::string::npos) << typo.status();
}

}  // namespace
}  // namespace tpuemu
