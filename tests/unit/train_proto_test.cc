// A training job crosses the wire typed: every key of a job file, read with a
// value other than its default, comes back from tpuemu.v1 as it was read.
#include <map>
#include <string>

#include "core/train/job.h"
#include "gtest/gtest.h"
#include "services/train_proto.h"

namespace tpuemu {
namespace {

// A value other than its default for every key; a key added to TrainKeys()
// fails the test until it has one here.
const std::map<std::string, std::string> kNotDefault = {
    {"name", "\"a: 'name' # not a comment\""},
    {"topology", "v5e:4x4"},
    {"num_slices", "2"},
    {"num_chips", "8"},
    {"ici_data_parallelism", "2"},
    {"ici_fsdp_parallelism", "4"},
    {"ici_tensor_parallelism", "-1"},
    {"ici_pipeline_parallelism", "2"},
    {"dcn_data_parallelism", "2"},
    {"dcn_fsdp_parallelism", "-1"},
    {"dcn_tensor_parallelism", "2"},
    {"dcn_pipeline_parallelism", "2"},
    {"emb_dim", "16"},
    {"mlp_dim", "32"},
    {"num_layers", "6"},
    {"global_batch_tokens", "24"},
    {"steps", "3"},
    {"num_pipeline_microbatches", "4"},
    {"num_pipeline_repeats", "2\npipeline_schedule: circular"},  // repeats need it
    {"pipeline_schedule", "1f1b"},
    {"pipeline_fsdp_ag_once", "true"},
    {"seed", "12345678901"},
    {"opt_type", "sgd"},
    {"learning_rate", "0.1"},
    {"adam_b1", "0.5"},
    {"adam_b2", "0.75"},
    {"adam_eps", "1e-6"},
    {"activation", "relu"},
    {"dtype", "f32"},
    {"wire_dtype", "bf16"},
    {"time_scale", "2.5"},
    {"fsdp_prefetch", "true"},
    {"hbm_bytes", "1.5e9"},
    {"checkpoint_every", "5"},
    {"max_restarts", "2"},
    {"faults", "\n  - slow_link: '0->1 x+@0.25+3us from 2'\n  - slow_link: y@0.5 until 4\n"
               "  - straggler: 3@2 from 1 until 3\n  - down_link: 1->2 y- from 2\n"
               "  - kill_worker: 1 at 3\n  - pause_worker: 0 at 2 for 1.5s"},
    {"on_down_link", "route"},
    {"values", "none"},
    {"mlp_activations", "[silu, linear]"},
    {"model", "llama2-7b\nbase_num_query_heads: 0"},  // attention's 4096-token sequences need a bigger batch
    {"remat_policy", "full"},
    // Attention's keys need one another: each with what it needs.
    {"base_num_query_heads", "2\nmax_target_length: 4"},
    {"base_num_kv_heads", "1\nbase_num_query_heads: 2\nmax_target_length: 4"},
    {"head_dim", "3\nbase_num_query_heads: 2\nmax_target_length: 4"},
    {"max_target_length", "8\nbase_num_query_heads: 4"},
    {"vocab_size", "100"},
};

TEST(TrainProtoTest, EveryKeyComesBackFromTheWireAsItWasRead) {
  const std::string required = "emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\n";
  auto without = ParseTrainSpec(required, "keys.yaml");
  ASSERT_TRUE(without.ok()) << without.status();
  for (const TrainKey& key : TrainKeys()) {
    ASSERT_TRUE(kNotDefault.contains(key.name)) << key.name << ": give it a value in kNotDefault";
    const std::string line = key.name + ": " + kNotDefault.at(key.name) + "\n";
    std::string text = required;
    if (const size_t at = text.find(key.name + ": 8\n"); at != std::string::npos) {
      text.replace(at, key.name.size() + 4, line);  // a required key: its line, with another value
    } else {
      text += line;
    }
    auto with = ParseTrainSpec(text, "keys.yaml");
    ASSERT_TRUE(with.ok()) << with.status();
    EXPECT_NE(with->config, without->config) << key.name << ": the value did not change the config";

    v1::TrainSpec wire;
    ASSERT_TRUE(wire.ParseFromString(ToProto(*with).SerializeAsString()));
    const TrainSpec back = FromProto(wire);
    EXPECT_EQ(back.config, with->config) << key.name;
    EXPECT_EQ(back.source, "keys.yaml");
  }
  // And what the coordinator adds when it resumes a job.
  TrainSpec resumed = *without;
  resumed.resume_step = 7;
  EXPECT_EQ(FromProto(ToProto(resumed)).resume_step, 7);
}

}  // namespace
}  // namespace tpuemu
