// The model's elementwise pieces made fast without changing a bit: the
// activation with its derivative from one pass, the weights' hashes made
// once per matrix, and the reference on several threads.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/base/splitmix.h"
#include "core/train/activation.h"
#include "core/train/config.h"
#include "core/train/model.h"
#include "core/train/tanh.h"
#include "gtest/gtest.h"

namespace tpuemu {
namespace {

std::vector<float> Inputs() {
  std::vector<float> h;
  for (int i = -4000; i <= 4000; ++i) h.push_back(static_cast<float>(i) / 500.0f);
  return h;
}

TEST(ActivationTest, ValueWithTheDerivativeIsTheForwardOnlyValueAndTheDerivativeIsRight) {
  for (const char* name : {"relu", "gelu", "silu", "tanh", "linear"}) {
    SCOPED_TRACE(name);
    const Activation f = ActivationNamed(name);
    const std::vector<float> h = Inputs();
    std::vector<float> forward(h.size()), a(h.size()), grad = h;  // grad written over its input
    Activate(f, h.data(), h.size(), forward.data());
    ActivateWithGrad(f, grad.data(), grad.size(), a.data(), grad.data());
    for (size_t i = 0; i < h.size(); ++i) {
      ASSERT_EQ(a[i], forward[i]) << "at " << h[i];  // bit for bit: the teacher and the student agree
      if (std::string(name) == "relu" && std::abs(h[i]) <= 0.011f) continue;  // the kink, within eps
      float plus = 0, minus = 0;
      const float x = h[i], eps = 1e-2f;
      const float xp = x + eps, xm = x - eps;
      Activate(f, &xp, 1, &plus);
      Activate(f, &xm, 1, &minus);
      EXPECT_NEAR(grad[i], (plus - minus) / (2 * eps), 2e-3) << "at " << x;
    }
  }
}

uint32_t BitsOf(float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  return u;
}

// The vector tanh against the C library's scalar tanhf, bit for bit, on
// every build this CPU runs: every 251st bit pattern (17 million floats of
// every sign, exponent, NaN and infinity), and every pattern within 4096 of
// each threshold where the scalar code changes branch. (All 2^32 matched on
// each of the three builds when it was written.)
TEST(TanhArrayTest, IsTheScalarTanhfBitForBitOnEveryBuild) {
  std::vector<uint32_t> patterns;
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 251) patterns.push_back(static_cast<uint32_t>(u));
  for (uint32_t edge : {0x24000000u, 0x33000000u, 0x3eb17218u, 0x3f000000u, 0x3f800000u, 0x3f851592u, 0x41b00000u,
                        0x7f800000u}) {
    for (uint32_t sign : {0u, 0x80000000u}) {
      for (uint32_t d = 0; d < 8192; ++d) patterns.push_back(sign | (edge - 4096 + d));
    }
  }
  std::vector<float> x(patterns.size()), want(patterns.size()), t(patterns.size());
  std::memcpy(x.data(), patterns.data(), patterns.size() * sizeof(float));
  for (size_t i = 0; i < x.size(); ++i) want[i] = std::tanh(x[i]);
  const std::vector<TanhBuild> builds = TanhBuildsThisCpuRuns();
  EXPECT_EQ(std::string(builds.back().name), "baseline");
  for (const TanhBuild& build : builds) {
    SCOPED_TRACE(build.name);
    build.kernel(x.data(), static_cast<int64_t>(x.size()), t.data());
    int64_t mismatches = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(want[i]) ? !std::isnan(t[i]) : BitsOf(want[i]) != BitsOf(t[i])) {
        if (++mismatches <= 5) {
          ADD_FAILURE() << std::hexfloat << "tanh(" << x[i] << ") = " << want[i] << ", got " << t[i];
        }
      }
    }
    EXPECT_EQ(mismatches, 0);
  }
}

TEST(TanhArrayTest, EveryLengthAndInPlaceOnEveryBuild) {
  for (const TanhBuild& build : TanhBuildsThisCpuRuns()) {
    SCOPED_TRACE(build.name);
    for (int n = 0; n <= 40; ++n) {
      std::vector<float> x(n), t(n + 1, 7.0f);
      for (int i = 0; i < n; ++i) x[i] = 0.37f * static_cast<float>(i - n / 2);
      build.kernel(x.data(), n, t.data());
      for (int i = 0; i < n; ++i) ASSERT_EQ(BitsOf(t[i]), BitsOf(std::tanh(x[i]))) << "n " << n << " i " << i;
      EXPECT_EQ(t[n], 7.0f) << "written past the end at n " << n;
      build.kernel(x.data(), n, x.data());
      for (int i = 0; i < n; ++i) ASSERT_EQ(BitsOf(x[i]), BitsOf(t[i])) << "in place, n " << n;
    }
  }
}

TEST(ActivationTest, UnknownNamesAreLinear) {
  const float h = -2.5f;
  float a = 0;
  Activate(ActivationNamed("linear"), &h, 1, &a);
  EXPECT_EQ(a, h);
  EXPECT_EQ(ActivationNamed("nonsense"), Activation::kLinear);
}

TEST(LayerWeightsTest, EqualTheHashOfSeedStreamAndIndexAsDocumented) {
  TrainConfig c;
  c.seed = 7;
  c.emb_dim = 16;
  c.mlp_dim = 64;
  for (WeightStream stream : {WeightStream::kStudent, WeightStream::kTeacher}) {
    for (Matrix m : {Matrix::kIn, Matrix::kOut, Matrix::kUp}) {
      const LayerWeights w(c, stream, 3, m);
      // Win and Wout: bit 0 says which; a gated MLP's Wup: bit 39 as well.
      const uint64_t bits = m == Matrix::kIn ? 3 << 1 : m == Matrix::kOut ? (3 << 1) | 1 : (uint64_t{1} << 39) | (3 << 1);
      const uint64_t matrix = SplitMix64((static_cast<uint64_t>(stream) << 40) | bits);
      const float scale = (m == Matrix::kUp ? 2.0f : 1.0f) *
                          std::sqrt(3.0f / static_cast<float>(m == Matrix::kOut ? c.mlp_dim : c.emb_dim));
      for (int64_t i : {int64_t{0}, int64_t{1}, int64_t{1023}, int64_t{1} << 33}) {
        // Uniform(seed, weight stream 1, matrix ^ index), written out.
        const uint64_t r = SplitMix64(SplitMix64(SplitMix64(c.seed) ^ 1) ^ (matrix ^ static_cast<uint64_t>(i)));
        EXPECT_EQ(w(i), scale * UnitFloat(r)) << i;
      }
    }
  }
}

TEST(ReferenceTrainerTest, ThreadsChangeNoBit) {
  auto c = ParseTrainConfig(
      "emb_dim: 64\nmlp_dim: 256\nnum_layers: 2\nglobal_batch_tokens: 1024\nseed: 5\nactivation: gelu\n", "t.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  ReferenceTrainer one(*c, 1), three(*c, 3);
  for (int s = 0; s < 3; ++s) EXPECT_EQ(one.Step().loss, three.Step().loss) << "step " << s;
  EXPECT_EQ(one.weights().win, three.weights().win);
  EXPECT_EQ(one.weights().wout, three.weights().wout);
}

}  // namespace
}  // namespace tpuemu
