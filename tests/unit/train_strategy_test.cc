// Every strategy on several meshes over the in-memory pod equals the
// one-device reference (DESIGN §6's invariant): the loss of every step and
// the final parameters within 1e-5 relative, with Adam and SGD; the bytes each
// chip sends per step, counted by the link layer, equal seed 001's table.
#include <cmath>

#include "core/train/host.h"
#include "core/job/inprocess_pod.h"
#include "core/train/job.h"
#include "core/train/model.h"
#include "core/train/report.h"
#include "gtest/gtest.h"
#include "tests/unit/train_compare.h"

namespace tpuemu {
namespace {

struct StrategyCase {
  const char* name;
  const char* topology;
  int slices;
  const char* mesh;  // job-file lines
};

void PrintTo(const StrategyCase& c, std::ostream* os) { *os << c.name; }

const StrategyCase kCases[] = {
    {"DpRing8", "v5p:8", 1, "ici_data_parallelism: -1\nici_fsdp_parallelism: 1\n"},
    {"Dp2x4", "v5p:2x4", 1, "ici_data_parallelism: -1\nici_fsdp_parallelism: 1\n"},
    {"DpTwoSlices", "v5p:4", 2, "ici_data_parallelism: -1\nici_fsdp_parallelism: 1\ndcn_data_parallelism: 2\n"},
    {"FsdpRing8", "v5p:8", 1, "ici_fsdp_parallelism: -1\n"},
    {"Fsdp2x4", "v5p:2x4", 1, "ici_fsdp_parallelism: -1\n"},
    {"FsdpTwoSlicesHierarchical", "v5p:4", 2, "ici_fsdp_parallelism: -1\ndcn_data_parallelism: 2\n"},
    {"FsdpAcrossSlices", "v5p:4", 2, "ici_fsdp_parallelism: -1\ndcn_data_parallelism: 1\ndcn_fsdp_parallelism: 2\n"},
    {"TpRing8", "v5p:8", 1, "ici_fsdp_parallelism: 1\nici_tensor_parallelism: -1\n"},
    {"Tp2x4", "v5p:2x4", 1, "ici_fsdp_parallelism: 1\nici_tensor_parallelism: -1\n"},
    {"TpTwoSlices", "v5p:4", 2, "ici_fsdp_parallelism: 1\nici_tensor_parallelism: -1\ndcn_data_parallelism: 2\n"},
    {"FsdpTp2x4", "v5p:2x4", 1, "ici_fsdp_parallelism: 2\nici_tensor_parallelism: 4\n"},
    {"FsdpTp4x4", "v5p:4x4", 1, "ici_fsdp_parallelism: 4\nici_tensor_parallelism: 4\n"},
    {"FsdpTpTwoSlices", "v5p:2x4", 2, "ici_fsdp_parallelism: 2\nici_tensor_parallelism: 4\ndcn_data_parallelism: 2\n"},
    {"DpFsdpTp", "v5p:2x2x2", 1, "ici_data_parallelism: 2\nici_fsdp_parallelism: 2\nici_tensor_parallelism: 2\n"},
};

class StrategyTest : public testing::TestWithParam<StrategyCase> {
 protected:
  // Trains `steps` steps sharded and on one device, comparing as it goes;
  // `gated`: LLaMA's gated MLP, mlp_activations: [silu, linear]; `extra`:
  // more keys.
  void TrainAndCompare(const std::string& optimizer, int steps, bool gated = false, const std::string& extra = "") {
    const StrategyCase& k = GetParam();
    const std::string text = std::string(k.mesh) + extra + "emb_dim: 32\nmlp_dim: 64\nnum_layers: 2\n" +
                             "global_batch_tokens: 64\nseed: 7\n" +
                             (gated ? "mlp_activations: [silu, linear]\n" : "activation: gelu\n") + "opt_type: " + optimizer +
                             (optimizer == "adam" ? "\nlearning_rate: 0.01\n"
                              : extra.empty() ? "\nlearning_rate: 20\n"
                                              : "\nlearning_rate: 0.5\n");  // attention's gradients are larger
    run_ = tpuemu::TrainAndCompare(k.topology, k.slices, text, steps);
    if (gated) {
      EXPECT_TRUE(run_.config.gated_mlp);
    }
    ASSERT_TRUE(run_.ok);
    if (steps > 1 && !gated) {  // a gated block's loss varies from batch to batch more than 4 steps move it
      EXPECT_LT(run_.losses.back(), 0.9 * run_.losses.front()) << "the loss should go down";
    }
  }

  // Seed 001's table for a block of `params` parameters (k D F, or the
  // LLaMA block's k D F + 2 D (Nq + Nkv) H) and `parts` parts, each of which
  // gathers its input and reduce-scatters its output over tensor.
  // With `vocab` V: the embedding's and projection's bytes (docs/jobs.md,
  // "Vocabulary") on top.
  void ExpectSeed001sBytes(double params, int parts = 1, double vocab = 0);

  ComparedRun run_;
};

TEST_P(StrategyTest, AdamEqualsOneDevice) { TrainAndCompare("adam", 4); }
TEST_P(StrategyTest, SgdEqualsOneDevice) { TrainAndCompare("sgd", 4); }
TEST_P(StrategyTest, GatedMlpWithAdamEqualsOneDevice) { TrainAndCompare("adam", 4, /*gated=*/true); }

// Seed 001's table, per layer and chip in bf16, for a block of k matrices
// (2: In and Out; 3: a gated MLP's In, Up and Out): DP 4k D F (N-1)/N over
// data, FSDP 6k D F (N-1)/N over fsdp (its shard of D: each collective moves
// the fsdp group's V), TP 8 B D (N-1)/N over tensor with B the chip's batch
// shard.
TEST_P(StrategyTest, BytesPerChipFollowSeed001sTable) {
  TrainAndCompare("sgd", 1);
  ExpectSeed001sBytes(2.0 * 32 * 64);
}

TEST_P(StrategyTest, GatedMlpBytesPerChipFollowSeed001sTableWithThreeMatrices) {
  TrainAndCompare("sgd", 1, /*gated=*/true);
  ExpectSeed001sBytes(3.0 * 32 * 64);
}

// The LLaMA-shaped block (issue 19): causal attention with grouped key-value
// heads, then a gated MLP. 16 query heads and 8 key-value heads of 4 split
// over up to 8 tensor shards; sequences of 4 tokens, at least 2 per chip.
constexpr char kLlamaBlock[] =
    "base_num_query_heads: 16\nbase_num_kv_heads: 8\nhead_dim: 4\nmax_target_length: 4\n";

TEST_P(StrategyTest, LlamaBlockWithSgdEqualsOneDevice) { TrainAndCompare("sgd", 2, /*gated=*/true, kLlamaBlock); }

TEST_P(StrategyTest, LlamaBlockWithAdamEqualsOneDevice) {
  TrainAndCompare("adam", 4, /*gated=*/true, kLlamaBlock);
  EXPECT_TRUE(run_.config.attention());
}

// Attention's bytes (docs/jobs.md, "Attention"): its four matrices add
// 2 D (Nq + Nkv) H parameters to each block, which DP and FSDP move as they
// move the MLP's (4 and 6 bytes per parameter, over tensor shards), and its
// input gather and output reduce-scatter add TP's 8 B D again.
TEST_P(StrategyTest, LlamaBlockBytesPerChipFollowSeed001sTableWithAttention) {
  TrainAndCompare("sgd", 1, /*gated=*/true, kLlamaBlock);
  ExpectSeed001sBytes(3.0 * 32 * 64 + 2.0 * 32 * (16 + 8) * 4, /*parts=*/2);
}

// A LLaMA-shaped model (issue 19): token ids embedded, the blocks, the
// vocabulary projection and a cross-entropy, V split over tensor shards.
constexpr char kLlamaModel[] =
    "base_num_query_heads: 16\nbase_num_kv_heads: 8\nhead_dim: 4\nmax_target_length: 4\nvocab_size: 64\n";

TEST_P(StrategyTest, LlamaModelWithVocabularyAndAdamEqualsOneDevice) {
  TrainAndCompare("adam", 4, /*gated=*/true, kLlamaModel);
  EXPECT_TRUE(run_.config.embeddings());
}

// The vocabulary's bytes per chip per step (docs/jobs.md, "Vocabulary"):
// DP all-reduces E's and Wv's gradients, 4 x 2 V D/(T Z) (N-1)/N; FSDP
// gathers E forward and Wv forward and backward and reduce-scatters both
// gradients, 2 (M+1 + 2M+1) V D/T (N-1)/N; TP reduce-scatters the
// embedding's output and gathers its gradient, gathers the projection's
// input and reduce-scatters its gradient, and gathers 3 statistics per row
// and shard, 2 (4 B D + 3 B T) (N-1)/N.
TEST_P(StrategyTest, LlamaModelBytesPerChipAddTheVocabularys) {
  TrainAndCompare("sgd", 1, /*gated=*/true, kLlamaModel);
  ExpectSeed001sBytes(3.0 * 32 * 64 + 2.0 * 32 * (16 + 8) * 4, /*parts=*/2, /*vocab=*/64);
}

void StrategyTest::ExpectSeed001sBytes(double params, int parts, double vocab) {
  const TrainConfig& config_ = run_.config;
  const TrainMesh& mesh = *run_.mesh;
  const std::vector<ChipRunResult>& last = run_.steps.back();
  const double d = config_.emb_dim, layers = config_.num_layers;
  ASSERT_EQ(params, config_.LayerParams());
  const double data = mesh.size(MeshAxisKind::kData), fsdp = mesh.size(MeshAxisKind::kFsdp),
               tensor = mesh.size(MeshAxisKind::kTensor);
  const double b_local = config_.global_batch_tokens / (data * fsdp);
  // Weight collectives act on the tensor shard of each matrix (D x F/tensor);
  // DP's AllReduce acts on the fsdp shard of that.
  const double vd = vocab * d;
  const double want_data = (4 * params * layers + 4 * 2 * vd) / tensor / fsdp * (data - 1) / data;
  const double want_fsdp = (6 * params * layers + 2 * 5 * vd) / tensor * (fsdp - 1) / fsdp;
  const double want_tensor =
      (parts * 8 * b_local * d * layers + (vocab > 0 ? 2 * (4 * b_local * d + 3 * b_local * tensor) : 0)) *
      (tensor - 1) / tensor;
  // The per-layer table the coordinator prints says the same.
  const Topology& topo = *run_.topo;
  for (const LayerCost& row : PerLayerCosts(config_, mesh, topo, SummarizeStep(config_, mesh, topo, last))) {
    EXPECT_DOUBLE_EQ(row.emulated_bytes, row.predicted_bytes) << row.what;
    EXPECT_GT(row.emulated_s, 0) << row.what;
  }
  for (const ChipRunResult& c : last) {
    EXPECT_DOUBLE_EQ(c.mesh_bytes[0], want_data) << "data, chip " << c.chip;
    EXPECT_DOUBLE_EQ(c.mesh_bytes[1], want_fsdp) << "fsdp, chip " << c.chip;
    EXPECT_DOUBLE_EQ(c.mesh_bytes[2], want_tensor) << "tensor, chip " << c.chip;
  }
}

INSTANTIATE_TEST_SUITE_P(Meshes, StrategyTest, testing::ValuesIn(kCases),
                         [](const testing::TestParamInfo<StrategyCase>& info) { return std::string(info.param.name); });


struct Trained {
  std::vector<double> losses;
  double exposed_fsdp_s = 0;
  double step_s = 0;
};

Trained TrainOn(const std::string& shape, const std::string& extra, int steps = 3,
                const std::string& sizes = "emb_dim: 64\nmlp_dim: 256\nglobal_batch_tokens: 64\n") {
  auto topo = Topology::Create({shape, 1, 1, "auto"});
  auto spec = ParseTrainSpec("ici_fsdp_parallelism: -1\nnum_layers: 3\nseed: 11\nlearning_rate: 0.01\n" + sizes + extra,
                             "t.yaml");
  auto job = spec.ok() ? PlanTrainJob(*spec, *topo, 0) : absl::StatusOr<TrainJob>(spec.status());
  EXPECT_TRUE(job.ok()) << job.status();
  if (!job.ok()) return {};
  InProcessPod pod(*topo, 0);
  HostTrainer trainer(job->config, job->mesh, pod.network(), 1);
  EXPECT_TRUE(trainer.Prepare().ok());
  Trained t;
  for (int s = 0; s < steps; ++s) {
    auto chips = trainer.Run(s);
    EXPECT_TRUE(chips.ok()) << chips.status();
    const StepReport r = SummarizeStep(job->config, job->mesh, *topo, *chips);
    t.losses.push_back(r.loss);
    t.exposed_fsdp_s = r.exposed_comm_s[static_cast<int>(MeshAxisKind::kFsdp)];
    t.step_s = r.emulated_s;
  }
  return t;
}

TEST(FsdpPrefetchTest, HidesGathersBehindComputeWithTheSameLosses) {
  // Enough tokens per chip (512) that a layer's compute can hide most of its gathers.
  const std::string sizes = "emb_dim: 256\nmlp_dim: 1024\nglobal_batch_tokens: 4096\n";
  const Trained off = TrainOn("v5p:8", "fsdp_prefetch: false\n", 2, sizes);
  const Trained on = TrainOn("v5p:8", "fsdp_prefetch: true\n", 2, sizes);
  EXPECT_EQ(on.losses, off.losses);  // the same numbers, bit for bit
  EXPECT_LT(on.exposed_fsdp_s, 0.8 * off.exposed_fsdp_s) << "on " << on.exposed_fsdp_s << " off " << off.exposed_fsdp_s;
  EXPECT_LT(on.step_s, off.step_s);
}

TEST(WireDtypeTest, Bf16RoundsWhatCrossesLinks) {
  const Trained f32 = TrainOn("v5p:8", "wire_dtype: f32\n");
  const Trained bf16 = TrainOn("v5p:8", "wire_dtype: bf16\n");
  for (size_t i = 1; i < f32.losses.size(); ++i) {
    EXPECT_NE(bf16.losses[i], f32.losses[i]) << "step " << i;
    EXPECT_NEAR(bf16.losses[i], f32.losses[i], 0.05 * f32.losses[i]) << "step " << i;
  }
  // bf16 keeps 7 mantissa bits: steps of 1/128 above 1.
  EXPECT_EQ(RoundToBf16(1.0f + 1.0f / 512), 1.0f);
  EXPECT_EQ(RoundToBf16(1.0f + 1.0f / 256), 1.0f);              // a tie, to even
  EXPECT_EQ(RoundToBf16(1.0f + 3.0f / 256), 1.0f + 1.0f / 64);  // a tie, to even
  EXPECT_EQ(RoundToBf16(1.0f + 3.0f / 512), 1.0f + 1.0f / 128);
  EXPECT_EQ(RoundToBf16(-2.5f), -2.5f);
}

}  // namespace
}  // namespace tpuemu
