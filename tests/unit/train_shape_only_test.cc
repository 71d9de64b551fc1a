// A shape-only step (values: none) is the real-data step without its values:
// the same per-chip programs over the same links, so every emulated figure
// of every step (step time, compute, per-axis communication, bytes each chip
// sent, the bubble) equals the real-data run's, on meshes up to 64 chips.
#include <cmath>
#include <string>

#include "core/job/inprocess_pod.h"
#include "core/train/job.h"
#include "core/train/report.h"
#include "core/train/step_clock.h"
#include "gtest/gtest.h"

namespace tpuemu {
namespace {

struct ShapeCase {
  const char* name;
  const char* topology;
  int slices;
  const char* job;  // mesh lines
  int layers = 2;
};

void PrintTo(const ShapeCase& c, std::ostream* os) { *os << c.name; }

constexpr char kModel[] = "emb_dim: 64\nmlp_dim: 128\nglobal_batch_tokens: 128\nseed: 3\nsteps: 2\n";

const ShapeCase kCases[] = {
    {"Dp2x4", "v5p:2x4", 1, "ici_data_parallelism: -1\nici_fsdp_parallelism: 1\n"},
    {"FsdpRing8", "v5p:8", 1, "ici_fsdp_parallelism: -1\nfsdp_prefetch: true\n"},
    {"Tp2x4", "v5p:2x4", 1, "ici_fsdp_parallelism: 1\nici_tensor_parallelism: -1\n"},
    {"FsdpTpTwoSlices", "v5p:2x4", 2, "ici_fsdp_parallelism: 2\nici_tensor_parallelism: 4\ndcn_data_parallelism: 2\n"},
    {"Pipeline1f1b", "v5p:2x4", 1,
     "ici_fsdp_parallelism: 2\nici_pipeline_parallelism: 4\nnum_pipeline_microbatches: 8\n"
     "pipeline_schedule: 1f1b\n",
     4},
    {"PipelineCircularBf16Wire", "v5p:2x4", 1,
     "ici_data_parallelism: 2\nici_fsdp_parallelism: 1\nici_pipeline_parallelism: 4\n"
     "num_pipeline_repeats: 2\npipeline_schedule: circular\nwire_dtype: bf16\n",
     8},
    {"FsdpTp64", "v5p:4x4x4", 1, "ici_fsdp_parallelism: 16\nici_tensor_parallelism: 4\n"},
    {"GatedMlpFsdpTp64", "v5p:4x4x4", 1,
     "ici_fsdp_parallelism: 16\nici_tensor_parallelism: 4\nmlp_activations: [silu, linear]\nfsdp_prefetch: true\n"},
    {"GatedMlpPipeline", "v5p:2x4", 1,
     "ici_fsdp_parallelism: 2\nici_pipeline_parallelism: 4\nnum_pipeline_microbatches: 4\n"
     "mlp_activations: [silu, linear]\n",
     4},
    {"LlamaBlockFsdpTp64", "v5p:4x4x4", 1,
     "ici_fsdp_parallelism: 16\nici_tensor_parallelism: 4\nmlp_activations: [silu, linear]\n"
     "base_num_query_heads: 8\nbase_num_kv_heads: 4\nhead_dim: 8\nmax_target_length: 4\nfsdp_prefetch: true\n"},
    {"LlamaBlockPipeline", "v5p:2x4", 1,
     "ici_fsdp_parallelism: 2\nici_pipeline_parallelism: 4\nnum_pipeline_microbatches: 4\n"
     "mlp_activations: [silu, linear]\nbase_num_query_heads: 4\nhead_dim: 16\nmax_target_length: 8\n",
     4},
    {"LlamaModelFsdpTp64", "v5p:4x4x4", 1,
     "ici_fsdp_parallelism: 16\nici_tensor_parallelism: 4\nmlp_activations: [silu, linear]\n"
     "base_num_query_heads: 8\nbase_num_kv_heads: 4\nhead_dim: 8\nmax_target_length: 4\nvocab_size: 256\n"
     "fsdp_prefetch: true\n"},
    {"LlamaModelPipeline", "v5p:2x4", 1,
     "ici_tensor_parallelism: 2\nici_fsdp_parallelism: 1\nici_pipeline_parallelism: 4\nnum_pipeline_microbatches: 4\n"
     "mlp_activations: [silu, linear]\nbase_num_query_heads: 4\nhead_dim: 16\nmax_target_length: 8\nvocab_size: 96\n",
     4},
};

class ShapeOnlyTest : public testing::TestWithParam<ShapeCase> {
 protected:
  std::vector<StepReport> Steps(const std::string& values) {
    const ShapeCase& k = GetParam();
    auto topo = Topology::Create({k.topology, k.slices, 1, "auto"});
    EXPECT_TRUE(topo.ok()) << topo.status();
    if (!topo.ok()) return {};
    auto spec = ParseTrainSpec(std::string(kModel) + k.job + "num_layers: " + std::to_string(k.layers) +
                                   "\nvalues: " + values + "\n",
                               "job.yaml");
    EXPECT_TRUE(spec.ok()) << spec.status();
    if (!spec.ok()) return {};
    InProcessPod pod(*topo, 0);
    auto run = pod.Run(JobSpec(*spec));
    EXPECT_TRUE(run.ok()) << run.status();
    if (!run.ok()) return {};
    std::vector<StepReport> steps;
    for (const JobReport& s : run->steps) steps.push_back(std::any_cast<StepReport>(s));
    return steps;
  }
};

void ExpectSame(double shape, double real, const std::string& what) {
  EXPECT_NEAR(shape, real, 1e-9 * std::fabs(real)) << what;
}

TEST_P(ShapeOnlyTest, EveryEmulatedFigureEqualsTheRealDataRun) {
  const std::vector<StepReport> real = Steps("real"), shape = Steps("none");
  ASSERT_EQ(real.size(), 2u);
  ASSERT_EQ(shape.size(), real.size());
  for (size_t s = 0; s < real.size(); ++s) {
    const StepReport &r = real[s], &o = shape[s];
    const std::string at = "step " + std::to_string(s);
    EXPECT_TRUE(std::isfinite(r.loss)) << at;
    EXPECT_TRUE(std::isnan(o.loss)) << at << ": a shape-only step computes no loss";
    ASSERT_GT(r.emulated_s, 0);
    ExpectSame(o.emulated_s, r.emulated_s, at + " emulated step time");
    ExpectSame(o.compute_s, r.compute_s, at + " compute");
    for (int p = 0; p < kComputeParts; ++p) ExpectSame(o.compute_parts_s[p], r.compute_parts_s[p], at + " compute part");
    for (int a = 0; a < kMeshAxes; ++a) {
      const std::string axis = at + " axis " + MeshAxisName(static_cast<MeshAxisKind>(a));
      ExpectSame(o.exposed_comm_s[a], r.exposed_comm_s[a], axis + " exposed");
      ExpectSame(o.comm_s[a], r.comm_s[a], axis + " comm");
      EXPECT_EQ(o.comm_bytes[a], r.comm_bytes[a]) << axis + " bytes";
    }
    EXPECT_GT(r.comm_bytes_total, 0u) << at;
    EXPECT_EQ(o.comm_bytes_total, r.comm_bytes_total) << at;
    ExpectSame(o.mfu, r.mfu, at + " mfu");
    ExpectSame(o.bubble_fraction, r.bubble_fraction, at + " bubble");
    EXPECT_EQ(o.peak_activation_bytes, r.peak_activation_bytes) << at;
  }
}

INSTANTIATE_TEST_SUITE_P(Meshes, ShapeOnlyTest, testing::ValuesIn(kCases),
                         [](const testing::TestParamInfo<ShapeCase>& i) { return std::string(i.param.name); });

TEST(ShapeOnlyConfigTest, RefusesCheckpointsAndUnknownValues) {
  auto checkpointed = ParseTrainSpec(std::string(kModel) + "values: none\ncheckpoint_every: 1\n", "job.yaml");
  ASSERT_FALSE(checkpointed.ok());
  EXPECT_NE(checkpointed.status().message().find("checkpoint_every: 1: a shape-only job"), std::string::npos)
      << checkpointed.status();
  auto unknown = ParseTrainSpec(std::string(kModel) + "values: zeros\n", "job.yaml");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("values: 'zeros': allowed: real, none"), std::string::npos)
      << unknown.status();
}

TEST(ShapeOnlyConfigTest, ShapeOnlyIsNotBoundByTheReferencesHostMemory) {
  // 2 GiB of weights: too big for a one-device reference, fine shape-only.
  const std::string big = "emb_dim: 16384\nmlp_dim: 65536\nnum_layers: 4\nglobal_batch_tokens: 65536\n";
  auto refused = ParseTrainSpec(big, "job.yaml");
  ASSERT_FALSE(refused.ok());
  // The refusal says how to run it anyway.
  EXPECT_NE(refused.status().message().find("give `values: none` to run it shape-only"), std::string::npos)
      << refused.status();
  EXPECT_TRUE(ParseTrainSpec(big + "values: none\n", "job.yaml").ok());
}

}  // namespace
}  // namespace tpuemu

namespace tpuemu {
namespace {

// Full remat keeps each layer's input shard and makes the rest again in the
// backward pass: the same numbers bit for bit, less held, more computed, and
// one more gather of the input over tensor (seed 001's TP row, 10 B D).
TEST(RematTest, FullRematComputesTheSameBitsHoldingLess) {
  auto topo = Topology::Create({"v5p:2x4", 1, 4, "auto"});
  ASSERT_TRUE(topo.ok());
  // The MLP alone, gated, and after attention (whose two parts each gather
  // their input once more).
  const std::string blocks[] = {
      "mlp_activations: [gelu]\n", "mlp_activations: [silu, linear]\n",
      "mlp_activations: [silu, linear]\nbase_num_query_heads: 8\nbase_num_kv_heads: 4\nmax_target_length: 8\n"};
  for (const std::string& mlp : blocks) {
    auto run = [&](const char* remat) {
      auto spec = ParseTrainSpec(std::string(kModel) + "ici_fsdp_parallelism: 2\nici_tensor_parallelism: 4\n" +
                                     "num_layers: 2\n" + mlp + "remat_policy: " + remat + "\n",
                                 "job.yaml");
      EXPECT_TRUE(spec.ok()) << spec.status();
      auto r = InProcessPod(*topo, 0).Run(JobSpec(*spec));
      EXPECT_TRUE(r.ok()) << r.status();
      return *std::move(r);
    };
    const JobRun none = run("none"), full = run("full");
    const auto& tn = std::any_cast<const TrainReport&>(none.report);
    const auto& tf = std::any_cast<const TrainReport&>(full.report);
    EXPECT_EQ(tf.param_l2, tn.param_l2) << mlp;
    for (size_t s = 0; s < none.steps.size(); ++s) {
      const auto& n = std::any_cast<const StepReport&>(none.steps[s]);
      const auto& f = std::any_cast<const StepReport&>(full.steps[s]);
      EXPECT_EQ(f.loss, n.loss) << mlp;
      EXPECT_LT(f.peak_activation_bytes, n.peak_activation_bytes / 4) << mlp;
      EXPECT_GT(f.compute_parts_s[0], n.compute_parts_s[0]) << mlp;  // forward matmuls again
      const int t = static_cast<int>(MeshAxisKind::kTensor);
      EXPECT_EQ(4 * f.comm_bytes[t], 5 * n.comm_bytes[t]) << mlp;
    }
    for (const LayerCost& row : tf.per_layer) EXPECT_DOUBLE_EQ(row.emulated_bytes, row.predicted_bytes) << row.what;
    // What the memory check counts is what the chips held, either way.
    for (const JobRun* r : {&none, &full}) {
      const auto& last = std::any_cast<const StepReport&>(r->steps.back());
      for (const MemoryItem& m : std::any_cast<const TrainReport&>(r->report).memory_per_chip) {
        if (m.name == "activations") {
          EXPECT_EQ(last.peak_activation_bytes, static_cast<uint64_t>(m.bytes)) << mlp;
        }
      }
    }
  }
}

// Nothing reads the first layer's input gradient in a DP job (no embedding or
// attention before it, no tensor shards), and the host skips making it; the
// emulated chip is still charged for it. A shape-only run skips alike, so the
// equality above cannot show this: two identical layers must cost exactly
// twice one layer's backward multiplies, plain and gated, on a ring (FSDP)
// too, whose gathers the multiply waits on.
TEST(EmulatedChargesTest, TheFirstLayersUnreadInputGradientIsStillCharged) {
  auto topo = Topology::Create({"v5p:2x4", 1, 4, "auto"});
  ASSERT_TRUE(topo.ok());
  const std::string meshes[] = {"ici_data_parallelism: -1\nici_fsdp_parallelism: 1\n",
                                "ici_data_parallelism: -1\nici_fsdp_parallelism: 1\nmlp_activations: [silu, linear]\n",
                                "ici_fsdp_parallelism: -1\n"};
  for (const std::string& mesh : meshes) {
    auto backward_s = [&](int layers) {
      auto spec = ParseTrainSpec(std::string(kModel) + mesh + "num_layers: " + std::to_string(layers) + "\n", "job.yaml");
      EXPECT_TRUE(spec.ok()) << spec.status();
      if (!spec.ok()) return -1.0;
      auto r = InProcessPod(*topo, 0).Run(JobSpec(*spec));
      EXPECT_TRUE(r.ok()) << r.status();
      if (!r.ok()) return -1.0;
      return std::any_cast<const StepReport&>(r->steps.at(0))
          .compute_parts_s[static_cast<int>(ComputeKind::kBackwardMatmul)];
    };
    const double one = backward_s(1), two = backward_s(2);
    ASSERT_GT(one, 0) << mesh;
    EXPECT_NEAR(two, 2 * one, 1e-12 * two) << mesh;
  }
}

}  // namespace
}  // namespace tpuemu
