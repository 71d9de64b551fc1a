// The job file's checks and the one-device reference trainer: gradients
// against finite differences, losses going down, determinism.
#include <cmath>
#include <functional>

#include "core/train/config.h"
#include "core/train/model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tpuemu {
namespace {

using testing::HasSubstr;

TrainConfig Tiny(const std::string& extra = "") {
  auto c = ParseTrainConfig("emb_dim: 8\nmlp_dim: 16\nnum_layers: 2\nglobal_batch_tokens: 12\nseed: 3\n" + extra,
                            "tiny.yaml");
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

TEST(TrainConfigTest, DefaultsFollowMaxText) {
  const TrainConfig c = Tiny();
  EXPECT_EQ(c.ici.fsdp, -1);
  EXPECT_EQ(c.dcn.data, -1);
  EXPECT_EQ(c.opt_type, "adam");
  EXPECT_EQ(c.dtype_bytes, 2);
  EXPECT_EQ(c.wire_dtype_bytes, 4);
}

TEST(TrainConfigTest, BadFilesNameKeyValueAndWhatIsAllowed) {
  struct Case {
    const char* text;
    const char* says;
  };
  const Case cases[] = {
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nlearning_rat: 0.1\n", "learning_rat: unknown key (did you mean learning_rate?)"},
      {"emb_dim: eight\nmlp_dim: 8\nglobal_batch_tokens: 8\n", "emb_dim: 'eight' is not a whole number"},
      {"emb_dim: 8.5\nmlp_dim: 8\nglobal_batch_tokens: 8\n", "emb_dim: '8.5' is not a whole number"},
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nopt_type: lion\n", "opt_type: 'lion': allowed: adam, sgd"},
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nactivation: swish\n", "allowed: relu, gelu, silu, tanh"},
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nadam_b2: 1.5\n", "adam_b2: 1.5: must be in [0, 1)"},
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nfsdp_prefetch: maybe\n", "'maybe' is not true or false"},
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nici_data_parallelism: 0\n", "must be -1 (the rest) or a count from 1 to 65536"},
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nsteps: 1000001\n", "steps: 1000001: must be a whole number from 1 to 1000000"},
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 99999999999999999999\n",
       "global_batch_tokens: 99999999999999999999: must be between 1 and 16777216"},
      // YAML reads 010 as octal 8: refused, not run as 8 steps.
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nsteps: 010\n", "steps: '010': write it without the leading zero"},
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nsteps: 0x10\n", "steps: '0x10' is not a whole number"},
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nseed: -1\n",
       "seed: -1: must be a whole number from 0 to 18446744073709551615"},
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nseed: 99999999999999999999\n",
       "seed: 99999999999999999999: must be a whole number from 0 to 18446744073709551615"},
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nlearning_rate: 1000\n", "learning_rate: 1000: must be above 0 and below 1000"},
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nhbm_bytes: 2e15\n", "hbm_bytes: 2e15: must be at least 0 and below 1e15"},
      // Past a double's range: yaml-cpp calls it not a number; it is one, too large.
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nlearning_rate: 1e400\n",
       "learning_rate: 1e400: must be above 0 and below 1000"},
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nadam_b1: -1e999\n", "adam_b1: -1e999: must be in [0, 1)"},
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nadam_b1: 0.9x\n", "adam_b1: '0.9x' is not a number"},
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nsteps: 2\nsteps: 3\n", "steps: given twice (lines 4 and 5); give it once"},
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\n---\nsteps: 3\n", "line 5 starts a second YAML document"},
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\n...\n# done\nsteps: 3\n", "line 6 starts a second YAML document"},
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\n--- steps: 3\n", "line 4 starts a second YAML document"},
      {"emb_dim: 8\nmlp_dim: 8\n", "global_batch_tokens: missing"},
      {"emb_dim: [8]\nmlp_dim: 8\nglobal_batch_tokens: 8\n", "emb_dim: expected a single int"},
      {"- a\n- b\n", "expected a flat map"},
      {"emb_dim: 8\n  mlp_dim: : 8\n", "not valid YAML"},
      {"emb_dim: 8\n  mlp_dim: 8\nglobal_batch_tokens: 8\n",
       "illegal map value (line 2 is indented: every key of this file starts its own line, none nested)"},
      {"emb_dim: 8\nmlp_dim: 8\n global_batch_tokens: 8\n", "(line 3 is indented"},
      {"emb_dim: 16384\nmlp_dim: 65536\nnum_layers: 8\nglobal_batch_tokens: 8\n", "MiB of host memory"},
      {"base_emb_dim: 8\nemb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\n",
       "emb_dim: give emb_dim once: as emb_dim or as base_emb_dim"},
      {"emb_dim: 8\nmlp_dim: 8\nbase_mlp_dim: 8\nglobal_batch_tokens: 8\n",
       "base_mlp_dim: give mlp_dim once: as mlp_dim or as base_mlp_dim"},
      // Attention's keys, each wrong once.
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nbase_num_query_heads: 4\n",
       "max_target_length: missing or 0: attention needs the sequence length"},
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nbase_num_query_heads: 4\nbase_num_kv_heads: 3\n"
       "max_target_length: 4\n",
       "base_num_kv_heads: 3: must divide base_num_query_heads=4"},
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nbase_num_query_heads: 3\nmax_target_length: 4\n",
       "head_dim: missing, and emb_dim=8 does not split over base_num_query_heads=3; give head_dim"},
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nbase_num_kv_heads: 2\n",
       "base_num_kv_heads: 2 without attention: set base_num_query_heads too"},
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 12\nbase_num_query_heads: 2\nmax_target_length: 8\n",
       "global_batch_tokens: 12 is not whole sequences of max_target_length=8; use a multiple of 8"},
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nbase_num_query_heads: -2\n",
       "base_num_query_heads: -2: must be between 0 and 65536"},
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nmlp_activations: [silu, gelu]\n",
       "mlp_activations: expected [NAME] (one activation) or [NAME, linear]"},
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nmlp_activations: [swish, linear]\n",
       "mlp_activations: 'swish': allowed: relu, gelu, silu, tanh, linear"},
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nmlp_activations: []\n", "mlp_activations: expected [NAME]"},
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nactivation: relu\nmlp_activations: [silu, linear]\n",
       "mlp_activations: give the activation once"},
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nmlp_activations: [silu, linear]\nactivation: relu\n",
       "activation: give the activation once"},
      {"model: llama4\nglobal_batch_tokens: 8\n", "model: 'llama4': allowed: llama2-13b, llama2-7b, llama3-70b"},
      {"model: llama3-8b\n", "global_batch_tokens: missing"},
  };
  for (const Case& c : cases) {
    auto r = ParseTrainConfig(c.text, "job.yaml");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.says)) << r.status();
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("job.yaml")) << r.status();
  }
}

TEST(TrainConfigTest, DocumentMarkersAroundTheOneDocumentAreFine) {
  for (const char* text : {"---\nemb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nsteps: 3\n",
                           "# a job\n--- \r\nemb_dim: 8\r\nmlp_dim: 8\nglobal_batch_tokens: 8\nsteps: 3\n...\n",
                           "emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nsteps: 3\n---\n# nothing more\n"}) {
    auto c = ParseTrainConfig(text, "job.yaml");
    ASSERT_TRUE(c.ok()) << text << ": " << c.status();
    EXPECT_EQ(c->steps, 3) << text;
  }
}

// A fuzzer's input on which yaml-cpp 0.7's LoadAll allocated without end:
// refused as it is, at once (a hang would fail at ctest's timeout).
TEST(TrainConfigTest, AFileOnWhichYamlCppsLoadAllNeverEndedIsRefused) {
  const std::string text = "# A small La-b\n\n\n\n\n\n\n\n,\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\nz\n\xdf""\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\nlock.yammax_targAt_lengt\xff"": 32\nvocab_size: 256\nglobal_batch_tokens: 256\nsteps: 5\nlearnin\xff""\xff""\xff""\xff""\xff""\xff""\xff""\xff""g_rate: 0&003\n";
  auto c = ParseTrainConfig(text, "job.yaml");
  EXPECT_FALSE(c.ok());
}

TEST(TrainConfigTest, MaxTextsNamesForTheSizesReadAsOurs) {
  auto c = ParseTrainConfig("base_emb_dim: 16\nbase_mlp_dim: 32\nbase_num_decoder_layers: 3\nglobal_batch_tokens: 8\n",
                            "job.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->emb_dim, 16);
  EXPECT_EQ(c->mlp_dim, 32);
  EXPECT_EQ(c->num_layers, 3);
  auto bad = ParseTrainConfig("base_emb_dim: 0\nmlp_dim: 8\nglobal_batch_tokens: 8\n", "job.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("emb_dim: 0: must be between 1 and 16777216"));
}

TEST(TrainConfigTest, AModelPresetGivesItsBlockAndTheFilesKeysOverrideIt) {
  auto c = ParseTrainConfig("global_batch_tokens: 16384\nnum_layers: 2\nmodel: llama3-70b\n", "job.yaml", true);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->emb_dim, 8192);
  EXPECT_EQ(c->mlp_dim, 28672);
  EXPECT_EQ(c->num_layers, 2);  // the file's, wherever the preset stands
  EXPECT_TRUE(c->gated_mlp);
  EXPECT_EQ(c->activation, "silu");
  EXPECT_EQ(c->mlp_matrices(), 3);
  // LLaMA-3 70B's attention: 64 query heads of 128 sharing 8 key-value heads, 8192 tokens.
  EXPECT_EQ(c->num_query_heads, 64);
  EXPECT_EQ(c->num_kv_heads, 8);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->seq_len, 8192);
  // base_num_query_heads: 0 drops it, the preset's other attention keys with it.
  auto mlp_only = ParseTrainConfig("model: llama3-70b\nbase_num_query_heads: 0\nglobal_batch_tokens: 8\n", "job.yaml",
                                   true);
  ASSERT_TRUE(mlp_only.ok()) << mlp_only.status();
  EXPECT_FALSE(mlp_only->attention());
  EXPECT_EQ(mlp_only->seq_len, 0);
  EXPECT_EQ(mlp_only->LayerParams(), 3.0 * 8192 * 28672);
  auto plain = ParseTrainConfig("model: llama2-7b\nmlp_activations: [gelu]\nemb_dim: 64\nmlp_dim: 128\n"
                                "global_batch_tokens: 8\nbase_num_query_heads: 64\nmax_target_length: 4\n",
                                "job.yaml");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->gated_mlp);
  EXPECT_EQ(plain->num_layers, 32);
  EXPECT_EQ(plain->emb_dim, 64);
  EXPECT_EQ(plain->num_kv_heads, 32);  // the preset's, where the file says nothing
  EXPECT_EQ(plain->head_dim, 128);
}

// A config that arrived typed (over the wire, not from a file) gets the
// error a job file with the same value gets.
TEST(TrainConfigTest, TypedConfigsAreCheckedAsJobFilesAre) {
  const TrainConfig good = Tiny();
  EXPECT_TRUE(ValidateTrainConfig(good, "job.yaml").ok());
  struct Case {
    std::function<void(TrainConfig&)> set;
    const char* yaml;  // emb_dim and the same value in a job file; nullptr: no file can hold it
    const char* says;
  };
  const Case cases[] = {
      {[](TrainConfig& c) { c.emb_dim = 0; }, "emb_dim: 0\n", "job.yaml: emb_dim: 0: must be between 1 and 16777216"},
      {[](TrainConfig& c) { c.steps = -2; }, "emb_dim: 8\nsteps: -2\n", "job.yaml: steps: -2: must be a whole number from 1 to 1000000"},
      {[](TrainConfig& c) { c.checkpoint_every = -1; }, "emb_dim: 8\ncheckpoint_every: -1\n",
       "job.yaml: checkpoint_every: -1: must be between 0 and 1000000"},
      {[](TrainConfig& c) { c.max_restarts = 201; }, "emb_dim: 8\nmax_restarts: 201\n",
       "job.yaml: max_restarts: 201: must be between 0 and 200"},
      {[](TrainConfig& c) { c.ici.tensor = 0; }, "emb_dim: 8\nici_tensor_parallelism: 0\n",
       "job.yaml: ici_tensor_parallelism: 0: must be -1 (the rest) or a count from 1 to 65536"},
      {[](TrainConfig& c) { c.pipeline_schedule = "foo"; }, "emb_dim: 8\npipeline_schedule: foo\n",
       "job.yaml: pipeline_schedule: 'foo': allowed: gpipe, 1f1b, circular"},
      {[](TrainConfig& c) { c.adam_b2 = 1.5; }, "emb_dim: 8\nadam_b2: 1.5\n", "job.yaml: adam_b2: 1.5: must be in [0, 1)"},
      {[](TrainConfig& c) { c.pipeline_repeats = 2; }, "emb_dim: 8\nnum_pipeline_repeats: 2\n",
       "job.yaml: num_pipeline_repeats: 2: several layer groups per stage need pipeline_schedule: circular"},
      {[](TrainConfig& c) { c.dtype_bytes = 3; }, nullptr, "job.yaml: dtype: '3 bytes': allowed: bf16, f32"},
      {[](TrainConfig& c) { c.learning_rate = std::nan(""); }, nullptr, "job.yaml: learning_rate: nan: must be above 0 and below 1000"},
      {[](TrainConfig& c) { c.name.clear(); }, nullptr, "job.yaml: name: empty"},
      {[](TrainConfig& c) { c.topology.assign(kMaxJobFileBytes + 1, 'x'); }, nullptr,
       "job.yaml: topology: 1048577 bytes; at most 1048576"},
  };
  for (const Case& k : cases) {
    TrainConfig c = good;
    k.set(c);
    const absl::Status s = ValidateTrainConfig(c, "job.yaml");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << k.says;
    EXPECT_THAT(std::string(s.message()), HasSubstr(k.says));
    if (k.yaml == nullptr) continue;
    auto file = ParseTrainConfig("mlp_dim: 16\nnum_layers: 2\nglobal_batch_tokens: 12\nseed: 3\n" + std::string(k.yaml),
                                 "job.yaml");
    ASSERT_FALSE(file.ok()) << k.yaml;
    EXPECT_EQ(file.status().message(), s.message());
  }
  // "The pod's", which a file says by leaving the key out, passes.
  TrainConfig pods = good;
  pods.num_slices = 0;
  pods.time_scale = -1;
  pods.hbm_bytes = 0;
  pods.num_microbatches = -1;
  EXPECT_TRUE(ValidateTrainConfig(pods, "job.yaml").ok());
}

TEST(TrainConfigTest, MeshFillsInAndChecksProductsAndDivisibility) {
  auto topo = Topology::Create({"v5p:4x4", 2, 4, "auto"});
  ASSERT_TRUE(topo.ok());
  TrainConfig c = Tiny("ici_tensor_parallelism: 4\n");
  c.global_batch_tokens = 16;
  c.emb_dim = 8;
  c.mlp_dim = 16;
  ASSERT_TRUE(ResolveMesh(c, *topo).ok());
  EXPECT_EQ(c.ici.fsdp, 4);  // 16 chips / tensor 4
  EXPECT_EQ(c.dcn.data, 2);
  EXPECT_EQ(c.num_slices, 2);

  struct Case {
    std::string extra;
    const char* says;
  };
  const Case cases[] = {
      {"ici_data_parallelism: 3\n", "must divide the chips per slice (16)"},
      {"ici_data_parallelism: 2\nici_fsdp_parallelism: 2\n", "the product is 4 but must be the chips per slice (16)"},
      {"ici_data_parallelism: -1\n", "only one of ici_"},
      {"topology: v5e:4x4\n", "topology: v5e:4x4: the pod is v5p:4x4"},
      {"num_slices: 3\n", "num_slices: 3, but the pod has 2 slice(s)"},
      // Planned on the part it asks for (core/train/pod_part.h), never on the whole pod.
      {"num_slices: 1\n", "asks for part of v5p:4x4"},
      {"ici_tensor_parallelism: 32\n", "the product of the others (32) must divide the chips per slice (16)"},
  };
  for (const Case& k : cases) {
    TrainConfig bad = Tiny(k.extra);
    auto s = ResolveMesh(bad, *topo);
    ASSERT_FALSE(s.ok()) << k.extra;
    EXPECT_THAT(std::string(s.message()), HasSubstr(k.says)) << s;
  }
  TrainConfig odd = Tiny();
  auto s = ResolveMesh(odd, *topo);  // fsdp 16 x dcn data 2 = 32 batch shards of 12 tokens
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("global_batch_tokens: 12 does not split over the 32"));
  // Attention: the tensor axis splits whole key-value heads, and each
  // chip's rows are whole sequences.
  TrainConfig heads = Tiny("ici_tensor_parallelism: 4\nbase_num_query_heads: 4\nbase_num_kv_heads: 2\n"
                           "max_target_length: 4\n");
  heads.global_batch_tokens = 16;
  s = ResolveMesh(heads, *topo);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("base_num_kv_heads: 2 does not split over the 4 tensor shards"));
  TrainConfig rows = Tiny("ici_tensor_parallelism: 4\nbase_num_query_heads: 4\nmax_target_length: 4\n");
  rows.global_batch_tokens = 16;  // 2 tokens on each of 8 batch shards
  s = ResolveMesh(rows, *topo);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("max_target_length: 4: each chip's share of a microbatch is 2 tokens"));
  TrainConfig narrow = Tiny("ici_tensor_parallelism: 16\n");
  narrow.global_batch_tokens = 32;
  narrow.mlp_dim = 24;
  s = ResolveMesh(narrow, *topo);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("mlp_dim: 24 does not split over the 16 tensor shards"));
}

TEST(ReferenceTrainerTest, GradientsMatchFiniteDifferences) {
  // Every activation alone, gated MLPs (LLaMA's silu among them), and
  // causal attention before them (4 query heads sharing 2 key-value heads,
  // 3 sequences of 4 tokens), and token ids through an embedding, the
  // vocabulary projection and a cross-entropy.
  const std::string attention = "\nbase_num_query_heads: 4\nbase_num_kv_heads: 2\nmax_target_length: 4";
  const std::string vocabulary = "\nvocab_size: 16";
  for (const std::string& mlp : std::vector<std::string>{"[tanh]", "[gelu]", "[silu]", "[linear]", "[silu, linear]",
                                                         "[gelu, linear]", "[gelu]" + attention,
                                                         "[silu, linear]" + attention, "[gelu]" + vocabulary,
                                                         "[silu, linear]" + attention + vocabulary}) {
    TrainConfig c = Tiny("opt_type: sgd\nmlp_activations: " + mlp + "\n");
    c.learning_rate = 1.0;  // one SGD step moves each weight by exactly -gradient
    ReferenceTrainer t(c);
    const ModelWeights before = t.weights();
    t.Step();
    const ModelWeights after = t.weights();
    const std::pair<const char*, std::vector<std::vector<float>> ModelWeights::*> kMatrices[] = {
        {"Win", &ModelWeights::win}, {"Wup", &ModelWeights::wup}, {"Wout", &ModelWeights::wout},
        {"Wq", &ModelWeights::wq},   {"Wk", &ModelWeights::wk},   {"Wv", &ModelWeights::wv},
        {"Wo", &ModelWeights::wo},   {"E", &ModelWeights::embed}, {"Wvocab", &ModelWeights::vocab}};
    // E's rows of the batch's first tokens (the others' gradients are 0).
    const std::vector<int64_t> ids = c.embeddings() ? BatchTokenIds(c, 0, 0, 2) : std::vector<int64_t>{0, 0};
    for (int l = 0; l < c.num_layers; ++l) {
      for (const auto& [name, matrix] : kMatrices) {
        if ((before.*matrix).empty()) continue;  // Wup: gated MLPs only; attention's with attention
        ASSERT_EQ((before.*matrix).size(), static_cast<size_t>(c.num_layers)) << name;
        if ((before.*matrix)[l].empty()) continue;  // E: the first layer's; Wvocab: the last's
        const int64_t size = static_cast<int64_t>((before.*matrix)[l].size());
        for (int64_t i : {int64_t{0}, int64_t{5}, 37 % size, 101 % size, size - 1, (ids[0] * c.emb_dim + 3) % size,
                          (ids[1] * c.emb_dim + 6) % size}) {
          ModelWeights plus = before, minus = before;
          const double eps = 1e-2;
          (plus.*matrix)[l][i] += eps;
          (minus.*matrix)[l][i] -= eps;
          const double numeric = (BatchLoss(c, plus, 0) - BatchLoss(c, minus, 0)) / (2 * eps);
          const double analytic = (before.*matrix)[l][i] - (after.*matrix)[l][i];
          EXPECT_NEAR(analytic, numeric, 1e-3 + 2e-2 * std::fabs(numeric))
              << mlp << " layer " << l << " " << name << "[" << i << "]";
        }
      }
    }
    EXPECT_EQ(before.wup.empty(), !c.gated_mlp) << mlp;
    EXPECT_EQ(before.wk.empty(), !c.attention()) << mlp;
    EXPECT_EQ(before.embed.empty(), !c.embeddings()) << mlp;
  }
}

TEST(ReferenceTrainerTest, AVocabularyModelLearnsItsTargetsMap) {
  // Token ids embedded, two blocks, the projection and a cross-entropy that
  // starts near log V (the projection's logits are small) and falls.
  TrainConfig c = Tiny("vocab_size: 32\nlearning_rate: 0.01\n");
  ReferenceTrainer t(c);
  const double first = t.Step().loss;
  EXPECT_NEAR(first, std::log(32.0), 1.0);
  double last = first;
  for (int i = 0; i < 30; ++i) last = t.Step().loss;
  EXPECT_LT(last, 0.8 * first);
  EXPECT_EQ(BatchTokenIds(c, 1, 0, 12), BatchTokenIds(c, 1, 0, 12));
  for (int64_t id : TargetIds(c, BatchTokenIds(c, 1, 0, 12))) EXPECT_TRUE(id >= 0 && id < 32) << id;
}

TEST(TrainConfigTest, VocabularyMustSplitOverTensorAndBeInRange) {
  auto negative = ParseTrainConfig("emb_dim: 8\nmlp_dim: 16\nglobal_batch_tokens: 12\nvocab_size: -3\n", "v.yaml");
  ASSERT_FALSE(negative.ok());
  EXPECT_THAT(std::string(negative.status().message()), HasSubstr("vocab_size: -3: must be between 0 and 1048576"));
  TrainConfig c = Tiny("vocab_size: 30\nici_fsdp_parallelism: 1\nici_tensor_parallelism: -1\n");
  auto topo = Topology::Create({"v5p:4", 1, 4, "auto"});
  ASSERT_TRUE(topo.ok());
  const absl::Status s = ResolveMesh(c, *topo);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("vocab_size: 30 does not split over the 4 tensor shards"));
}

TEST(ReferenceTrainerTest, LossGoesDownWithAdamAndSgdAndIsDeterministic) {
  for (const char* opt : {"adam", "sgd"}) {
    TrainConfig c = Tiny(std::string("opt_type: ") + opt + "\n");
    c.learning_rate = std::string(opt) == "adam" ? 1e-2 : 0.5;
    ReferenceTrainer a(c), b(c);
    std::vector<double> losses;
    for (int s = 0; s < 20; ++s) {
      losses.push_back(a.Step().loss);
      EXPECT_EQ(b.Step().loss, losses.back());  // bit for bit
    }
    EXPECT_LT(losses.back(), 0.8 * losses.front()) << opt;
  }
}

}  // namespace
}  // namespace tpuemu
