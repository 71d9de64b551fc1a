// Seed 000's and seed 003's worked numbers about collectives, each next to
// what the emulator does for the same case. The seeds round (8.4e6 for 2^23
// bytes, "about 1 us" a hop) and use rules of thumb that drop (N-1)/N; each
// check says which tolerance its arithmetic allows.
#include "core/collective/oracle.h"
#include "core/collective/report.h"
#include "core/job/inprocess_pod.h"
#include "gtest/gtest.h"

namespace tpuemu {
namespace {

CollectiveReport RunCollective(const std::string& topology, CollectiveOp op, std::vector<Axis> axes, uint64_t bytes) {
  auto topo = Topology::Create({topology, 1, 1, "auto"});
  EXPECT_TRUE(topo.ok()) << topo.status();
  InProcessPod pod(*topo, 0);
  CollectiveSpec spec;
  spec.op = op;
  spec.axes = std::move(axes);
  spec.bytes = bytes;
  spec.chunk_bytes = 64 << 10;
  auto r = RunReport<CollectiveReport>(pod, spec);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  EXPECT_TRUE(r->correct);
  return *r;
}

constexpr uint64_t kB = 1024, kD = 4096;  // seed 000, question 2: bf16 [B_X, D_Y] on a v4 4x4x4

TEST(Seed000Test, Question2AllGatherOverOneAxis) {
  // "2BD / (9e10 Y) = 23 us": each X group gathers 2BD/Y bytes.
  const CollectiveReport r = RunCollective("v4:4x4x4", CollectiveOp::kAllGather, {Axis::kX}, 2 * kB * kD / 4);
  EXPECT_NEAR(r.seed_formula_s, 23e-6, 23e-6 * 0.02);
  // The bidirectional ring of 4 carries 3/8 of V per direction, not 1/2.
  EXPECT_NEAR(r.emulated_s, 0.75 * r.seed_formula_s + 1e-6, 0.02 * r.emulated_s);
}

TEST(Seed000Test, Question2AllGatherOverTwoAxes) {
  // "2BD / (2 W_ICI) ... 46 us, so we're throughput bound": n_axes = 2.
  const CollectiveReport r = RunCollective("v4:4x4x4", CollectiveOp::kAllGather, {Axis::kX, Axis::kY}, 2 * kB * kD);
  EXPECT_NEAR(r.seed_formula_s, 46e-6, 46e-6 * 0.02);
  // The per-link bound: 15/16 of V over 4 links.
  EXPECT_NEAR(r.emulated_s, 15.0 / 16 * r.seed_formula_s + 1e-6, 0.02 * r.emulated_s);
}

TEST(Seed000Test, Question2AllGatherOfAnUnreducedArray) {
  // AllGather_Z([B_X, D_Y]{U_Z}): "2BD/(16 x 9e10) = 5.8 us".
  const CollectiveReport r = RunCollective("v4:4x4x4", CollectiveOp::kAllGather, {Axis::kZ}, 2 * kB * kD / 16);
  EXPECT_NEAR(r.seed_formula_s, 5.8e-6, 5.8e-6 * 0.02);
  EXPECT_LT(r.emulated_s, r.seed_formula_s);
}

TEST(Seed000Test, Question3LatencyBoundAllGather) {
  // [B_X], B = 128 in bf16 on an axis of 4 with wraparound: "32 bytes in each
  // direction ... only 2 hops, so roughly 2 us".
  const CollectiveReport r = RunCollective("v4:4x4x4", CollectiveOp::kAllGather, {Axis::kX}, 128 * 2);
  EXPECT_NEAR(r.emulated_s, 2e-6, 2e-6 * 0.01);
  EXPECT_NEAR(r.seed_formula_s, 2e-6, 2e-6 * 0.01);
}

TEST(Seed000Test, PopQuiz2AllGatherOnALineOfV5e) {
  // AllGather_Y([E_Y, F]) on v5e {X: 8, Y: 4}, E = 2048, F = 8192: the rule
  // says 34e6 / 9e10 = 377 us, but Y has no wraparound: "3 x 8.4e6 / 4.5e10
  // = 560 us". E = F = 256: latency-bound, "3 x 1 us = 3 us".
  const CollectiveReport big = RunCollective("v5e:2x4", CollectiveOp::kAllGather, {Axis::kY}, 2048 * 8192 * 2);
  EXPECT_EQ(big.algorithm, "line");
  const double rule = 2048.0 * 8192 * 2 / 9e10;
  EXPECT_NEAR(rule, 377e-6, 377e-6 * 0.02);
  EXPECT_NEAR(big.seed_formula_s, 560e-6, 560e-6 * 0.01);  // the seed's 8.4e6 is 2^23 = 8.39e6
  EXPECT_NEAR(big.emulated_s, 560e-6, 560e-6 * 0.01);
  const CollectiveReport small = RunCollective("v5e:2x4", CollectiveOp::kAllGather, {Axis::kY}, 256 * 256 * 2);
  EXPECT_NEAR(small.seed_formula_s, 3e-6, 3e-6 * 0.01);
  // The 32 kB shard also goes on the wire ("32e3 / 4.5e10 = 0.7 us"): once,
  // and an eighth of it per further hop, cut-through.
  EXPECT_NEAR(small.emulated_s, 3e-6 + 1.25 * 32768 / 4.5e10, 0.01 * small.emulated_s);
}

TEST(Seed003Test, AllGatherAndAllToAllOnARingOfEight) {
  // 8 chips, V/W_bidir for the AllGather ("32 blocks in one direction");
  // the AllToAll "costs 1/4 of AllGather" (8 blocks each way).
  const uint64_t v = 64 << 20;
  const CollectiveReport ag = RunCollective("v5p:8", CollectiveOp::kAllGather, {Axis::kX}, v);
  const CollectiveReport a2a = RunCollective("v5p:8", CollectiveOp::kAllToAll, {Axis::kX}, v);
  EXPECT_NEAR(ag.seed_formula_s, v / 1.8e11, 1e-9);
  // Splitting the opposite chip's block: 28 blocks each way, 7/8 of the rule.
  EXPECT_NEAR(ag.emulated_s, 7.0 / 8 * ag.seed_formula_s + 1e-6, 0.01 * ag.emulated_s);
  EXPECT_NEAR(a2a.seed_formula_s, ag.seed_formula_s / 4, 1e-9);
  EXPECT_NEAR(a2a.emulated_s / (ag.seed_formula_s / 4), 1.0, 0.02);
}

}  // namespace
}  // namespace tpuemu
