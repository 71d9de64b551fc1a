// One chip standing for all (core/job/symmetric_pod.h) reports exactly what
// every chip running reports, wherever the chips are alike, and refuses,
// saying why, where they are not.
#include <cmath>
#include <string>

#include "core/job/inprocess_pod.h"
#include "core/job/symmetric_pod.h"
#include "core/train/job.h"
#include "core/train/report.h"
#include "gtest/gtest.h"

namespace tpuemu {
namespace {

struct AlikeCase {
  const char* name;
  const char* topology;
  int slices;
  const char* mesh;
};

void PrintTo(const AlikeCase& c, std::ostream* os) { *os << c.name; }

// D = 96 splits over every fsdp and tensor way here, and a gradient shard
// (D F / 16) over three slices.
constexpr char kModel[] = "emb_dim: 96\nmlp_dim: 128\nnum_layers: 4\nseed: 3\nsteps: 2\n";

const AlikeCase kAlike[] = {
    {"Dp4x4", "v5p:4x4", 1, "ici_data_parallelism: -1\nici_fsdp_parallelism: 1\n"},
    {"FsdpPrefetch4x4", "v5p:4x4", 1, "ici_fsdp_parallelism: -1\nfsdp_prefetch: true\n"},
    {"Tp4x4", "v5p:4x4", 1, "ici_fsdp_parallelism: 1\nici_tensor_parallelism: -1\n"},
    {"FsdpTp4x4x4", "v5p:4x4x4", 1, "ici_fsdp_parallelism: 16\nici_tensor_parallelism: 4\n"},
    {"DpFsdpTp4x4x4", "v5p:4x4x4", 1,
     "ici_data_parallelism: 4\nici_fsdp_parallelism: 4\nici_tensor_parallelism: 4\n"},
    {"GatedMlpFsdpTp4x4x4", "v5p:4x4x4", 1,
     "ici_fsdp_parallelism: 16\nici_tensor_parallelism: 4\nmlp_activations: [silu, linear]\n"},
    {"LlamaBlockFsdpTp4x4x4", "v5p:4x4x4", 1,
     "ici_fsdp_parallelism: 16\nici_tensor_parallelism: 4\nmlp_activations: [silu, linear]\n"
     "base_num_query_heads: 8\nbase_num_kv_heads: 4\nhead_dim: 16\nmax_target_length: 16\n"},
    {"LlamaBlockTp4x4", "v5p:4x4", 1,
     "ici_fsdp_parallelism: 1\nici_tensor_parallelism: -1\nmlp_activations: [silu, linear]\n"
     "base_num_query_heads: 16\nhead_dim: 6\nmax_target_length: 16\n"},
    {"FsdpTpThreeSlicesBf16Wire", "v5p:4x4", 3,
     "ici_fsdp_parallelism: 4\nici_tensor_parallelism: 4\ndcn_data_parallelism: 3\nwire_dtype: bf16\n"},
};

std::vector<StepReport> Steps(const absl::StatusOr<JobRun>& run) {
  std::vector<StepReport> steps;
  if (run.ok()) {
    for (const JobReport& s : run->steps) steps.push_back(std::any_cast<StepReport>(s));
  }
  return steps;
}

void ExpectSame(double one, double every, const std::string& what) {
  EXPECT_NEAR(one, every, 1e-12 * std::fabs(every)) << what;
}

class OneChipForAllTest : public testing::TestWithParam<AlikeCase> {};

TEST_P(OneChipForAllTest, ReportsWhatEveryChipReports) {
  const AlikeCase& k = GetParam();
  auto topo = Topology::Create({k.topology, k.slices, 4, "auto"});
  ASSERT_TRUE(topo.ok()) << topo.status();
  // 768 tokens split over every data x fsdp of these meshes (16, or 48 over three slices).
  auto spec = ParseTrainSpec(std::string(k.mesh) + kModel + "global_batch_tokens: 768\nvalues: none\n", "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_TRUE(CheckOneChipStandsForAll(*spec, *topo).ok()) << CheckOneChipStandsForAll(*spec, *topo);
  const absl::StatusOr<JobRun> every_run = InProcessPod(*topo, 0).Run(JobSpec(*spec));
  ASSERT_TRUE(every_run.ok()) << every_run.status();
  const absl::StatusOr<JobRun> one_run = SymmetricPod(*topo).Run(*spec);
  ASSERT_TRUE(one_run.ok()) << one_run.status();
  const std::vector<StepReport> every = Steps(every_run), one = Steps(one_run);
  ASSERT_EQ(every.size(), 2u);
  ASSERT_EQ(one.size(), every.size());
  for (size_t s = 0; s < every.size(); ++s) {
    const StepReport &e = every[s], &o = one[s];
    const std::string at = "step " + std::to_string(s);
    ASSERT_GT(e.emulated_s, 0);
    ExpectSame(o.emulated_s, e.emulated_s, at + " step time");
    ExpectSame(o.compute_s, e.compute_s, at + " compute");
    for (int a = 0; a < kMeshAxes; ++a) {
      const std::string axis = at + " axis " + MeshAxisName(static_cast<MeshAxisKind>(a));
      ExpectSame(o.exposed_comm_s[a], e.exposed_comm_s[a], axis + " exposed");
      ExpectSame(o.comm_s[a], e.comm_s[a], axis + " comm");
      EXPECT_EQ(o.comm_bytes[a], e.comm_bytes[a]) << axis;
    }
    EXPECT_GT(e.comm_bytes_total, 0u);
    EXPECT_EQ(o.comm_bytes_total, e.comm_bytes_total) << at;
    ExpectSame(o.mfu, e.mfu, at + " mfu");
    EXPECT_EQ(o.peak_activation_bytes, e.peak_activation_bytes) << at;
  }
  const TrainReport& es = std::any_cast<const TrainReport&>(every_run->report);
  const TrainReport& os = std::any_cast<const TrainReport&>(one_run->report);
  ASSERT_EQ(os.per_layer.size(), es.per_layer.size());
  for (size_t i = 0; i < es.per_layer.size(); ++i) {
    ExpectSame(os.per_layer[i].emulated_s, es.per_layer[i].emulated_s, es.per_layer[i].what + " per layer");
    EXPECT_EQ(os.per_layer[i].emulated_bytes, es.per_layer[i].emulated_bytes) << es.per_layer[i].what;
  }
}

INSTANTIATE_TEST_SUITE_P(Meshes, OneChipForAllTest, testing::ValuesIn(kAlike),
                         [](const testing::TestParamInfo<AlikeCase>& i) { return std::string(i.param.name); });

TEST(OneChipForAllTest, SaysWhyChipsAreNotAlike) {
  struct Unlike {
    const char* topology;
    int slices;
    const char* keys;
    const char* why;
  };
  const Unlike kUnlike[] = {
      {"v5p:4x4", 1, "values: real\n", "it computes values"},
      {"v5p:2x4", 1, "values: none\n", "axis x (2 chips) does not wrap"},
      {"v5p:4x4", 2, "values: none\nici_fsdp_parallelism: 16\n", "axis dcn (2 slices) does not wrap"},
      {"v5p:4x4", 1, "values: none\nici_fsdp_parallelism: 4\nici_pipeline_parallelism: 4\nnum_pipeline_microbatches: 4\n",
       "4 pipeline stages"},
      {"v5p:4x4", 1, "values: none\nfaults:\n  - straggler: 3@2\n", "faults on purpose"},
  };
  for (const Unlike& u : kUnlike) {
    auto topo = Topology::Create({u.topology, u.slices, 4, "auto"});
    ASSERT_TRUE(topo.ok()) << topo.status();
    auto spec = ParseTrainSpec(std::string(u.keys) + kModel + "global_batch_tokens: 256\n", "job.yaml");
    ASSERT_TRUE(spec.ok()) << u.keys << ": " << spec.status();
    const absl::Status s = CheckOneChipStandsForAll(*spec, *topo);
    EXPECT_NE(s.message().find(u.why), std::string::npos) << u.keys << ": " << s;
    EXPECT_FALSE(SymmetricPod(*topo).Run(*spec).ok()) << u.keys;
  }
}

}  // namespace
}  // namespace tpuemu
