// The teacher's targets, made once per host and shared by the chips that
// need the same rows; and the teacher's forward pass on several threads.
#include "core/train/teacher_targets.h"

#include <thread>

#include "core/train/config.h"
#include "core/train/model.h"
#include "gtest/gtest.h"

namespace tpuemu {
namespace {

TrainConfig Config(const std::string& extra = "activation: gelu\n") {
  auto c = ParseTrainConfig("emb_dim: 64\nmlp_dim: 128\nnum_layers: 2\nglobal_batch_tokens: 64\nseed: 7\n" + extra,
                            "t.yaml");
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

std::vector<float> Teachers(const TrainConfig& c, int step, int64_t first, int64_t count) {
  std::vector<float> rows = BatchTokens(c, step, first, count);
  ForwardPass(c, InitWeights(c, WeightStream::kTeacher), rows);
  return rows;
}

// The takers share one copy of the rows, made in parts by whichever of them
// came, and equal to the teacher's forward pass on all the rows at once: with
// attention in parts of whole sequences (16 rows of sequences of 8 are two).
TEST(TeacherTargetsTest, TakersShareOneCopyMadeInPartsThatEqualsTheWholeForwardPass) {
  for (const std::string extra : {"activation: gelu\n", "mlp_activations: [silu, linear]\nbase_num_query_heads: 4\n"
                                                         "base_num_kv_heads: 2\nhead_dim: 8\nmax_target_length: 8\n"}) {
    const TrainConfig c = Config(extra);
    TeacherTargets targets(c, std::make_shared<const ModelWeights>(InitWeights(c, WeightStream::kTeacher)));
    constexpr int kTakers = 4;
    std::vector<TeacherTargets::Rows> taken(kTakers);
    std::vector<std::thread> chips;
    for (int i = 0; i < kTakers; ++i) {
      chips.emplace_back([&, i] { taken[i] = targets.Take(/*step=*/2, /*first=*/16, /*count=*/16, kTakers); });
    }
    for (auto& t : chips) t.join();
    for (int i = 1; i < kTakers; ++i) EXPECT_EQ(taken[i], taken[0]) << "taker " << i << " has its own copy";
    EXPECT_EQ(*taken[0], Teachers(c, 2, 16, 16)) << extra;
    EXPECT_EQ(targets.held(), 0u) << "rows every taker has are forgotten";
  }
}

TEST(TeacherTargetsTest, RowsAreKeptUntilEveryTakerHasThemAndMadeAgainAfter) {
  const TrainConfig c = Config();
  TeacherTargets targets(c, std::make_shared<const ModelWeights>(InitWeights(c, WeightStream::kTeacher)));
  const auto first = targets.Take(1, 0, 16, 2);
  EXPECT_EQ(targets.held(), 1u);
  const auto other = targets.Take(1, 16, 16, 2);  // other rows: made for themselves
  EXPECT_NE(other, first);
  EXPECT_EQ(targets.held(), 2u);
  EXPECT_EQ(targets.Take(1, 0, 16, 2), first);
  EXPECT_EQ(targets.held(), 1u);
  const auto again = targets.Take(1, 0, 16, 1);  // asked after being forgotten
  EXPECT_NE(again, first);
  EXPECT_EQ(*again, *first);
  EXPECT_EQ(*other, Teachers(c, 1, 16, 16));
}

TEST(ForwardPassTest, ThreadsChangeNoBit) {
  for (const std::string extra : {"activation: gelu\n", "mlp_activations: [silu, linear]\n",
                                  "mlp_activations: [silu, linear]\nbase_num_query_heads: 4\nbase_num_kv_heads: 2\n"
                                  "head_dim: 8\nmax_target_length: 8\n"}) {
    const TrainConfig c = Config(extra);
    const ModelWeights teacher = InitWeights(c, WeightStream::kTeacher);
    std::vector<float> one = BatchTokens(c, 0, 0, 64), three = one;
    ForwardPass(c, teacher, one, 1);
    ForwardPass(c, teacher, three, 3);
    EXPECT_EQ(one, three) << extra;
  }
}

}  // namespace
}  // namespace tpuemu
