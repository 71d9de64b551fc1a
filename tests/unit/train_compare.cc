#include "tests/unit/train_compare.h"

#include <cmath>

#include "core/train/host.h"
#include "core/job/inprocess_pod.h"
#include "core/train/job.h"
#include "core/train/model.h"
#include "gtest/gtest.h"

namespace tpuemu {
namespace {

// Largest |shard - reference| and |reference| over one chip's shard of a
// weight whose full matrix has `cols` columns, the shard at (row0, col0).
void CompareShard(const LocalTensor& shard, const std::vector<float>& full, int64_t cols, int64_t row0, int64_t col0,
                  double& err, double& scale) {
  for (int64_t r = 0; r < shard.shape[0]; ++r) {
    for (int64_t c = 0; c < shard.shape[1]; ++c) {
      const float want = full[(row0 + r) * cols + col0 + c];
      err = std::max(err, std::fabs(static_cast<double>(shard.data[r * shard.shape[1] + c]) - want));
      scale = std::max(scale, std::fabs(static_cast<double>(want)));
    }
  }
}

}  // namespace

ComparedRun TrainAndCompare(const std::string& topology, int slices, const std::string& job_text, int steps) {
  ComparedRun run;
  auto topo = Topology::Create({topology, slices, 1, "auto"});
  if (!topo.ok()) {
    ADD_FAILURE() << topo.status();
    return run;
  }
  auto spec = ParseTrainSpec(job_text, "job.yaml");
  auto job = spec.ok() ? PlanTrainJob(*spec, *topo, 0) : absl::StatusOr<TrainJob>(spec.status());
  if (!job.ok()) {
    ADD_FAILURE() << job.status();
    return run;
  }
  const TrainConfig& config = job->config;
  const TrainMesh& mesh = job->mesh;
  InProcessPod pod(*topo, 0);
  HostTrainer sharded(config, mesh, pod.network(), 1);
  const absl::Status prepared = sharded.Prepare();
  EXPECT_TRUE(prepared.ok()) << prepared;
  ReferenceTrainer reference(config);
  for (int s = 0; s < steps; ++s) {
    auto chips = sharded.Run(s);
    if (!chips.ok()) {
      ADD_FAILURE() << chips.status();
      return run;
    }
    double sum = 0;
    for (const ChipRunResult& c : *chips) sum += c.loss_sum;
    const double loss = sum / config.loss_elements();
    const double want = reference.Step().loss;
    EXPECT_NEAR(loss, want, 1e-5 * want) << "step " << s << " on " << mesh.Describe();
    run.losses.push_back(loss);
    run.steps.push_back(*std::move(chips));
  }
  const ModelWeights& ref = reference.weights();
  const int64_t d = config.emb_dim;
  // Adam divides each gradient element by its own running RMS, so an
  // element that is a near-cancelling sum moves by lr x sign-ish(g) and
  // carries its summation-order error (microbatches, shards) into the
  // update at full relative size: allow 1e-3 of a step per step for it.
  // A wrong gradient moves weights by the order of lr per step.
  // Attention makes such sums of its own: a softmax's gradient sums to zero
  // over each row, so its keys' gradients cancel by construction, and under
  // tensor parallelism its output (the MLP's input) is a sum over shards in
  // another order. 3e-2 of a step per step covers the most seen (1.7e-2, the
  // MLP's Wout after attention on 8 tensor shards); a wrong gradient is
  // still 30 times more.
  const double adam_slack =
      config.opt_type == "adam" ? (config.attention() ? 3e-2 : 1e-3) * config.learning_rate * steps : 0;
  std::vector<int> holders(config.num_layers, 0);
  for (const auto& chip : sharded.chips()) {
    for (int l = 0; l < config.num_layers; ++l) {
      if (!chip->owns(l)) continue;
      ++holders[l];
      double err = 0, scale = 0;
      for (Matrix m : LayerMatrices(config, l)) {
        const int64_t width = MatrixWidth(config, m);
        if (AlongD(m)) {
          CompareShard(chip->weight(m, l), ref.of(m)[l], width, chip->d_offset(), chip->width_offset(m), err, scale);
        } else {
          CompareShard(chip->weight(m, l), ref.of(m)[l], d, chip->width_offset(m), chip->d_offset(), err, scale);
        }
      }
      EXPECT_LE(err, 1e-5 * scale + adam_slack) << "layer " << l << " on " << mesh.Describe();
    }
  }
  // Every layer lives on the chips of one stage: the pod over stages.
  for (int l = 0; l < config.num_layers; ++l) EXPECT_EQ(holders[l], topo->num_chips() / mesh.stages()) << "layer " << l;
  run.ok = true;
  run.config = config;
  run.topo = *topo;
  run.mesh = mesh;
  return run;
}

}  // namespace tpuemu
