// Small training jobs for the cluster tests, and the check that a finished
// one equals the one-device reference.
#pragma once

#include <cmath>
#include <string>

#include "core/train/job.h"
#include "core/train/model.h"
#include "gtest/gtest.h"
#include "tpuemu/v1/services.pb.h"

namespace tpuemu {

// A job file's text as the CLI sends it: parsed, typed.
inline TrainSpec Parsed(const std::string& yaml, const std::string& source) {
  auto spec = ParseTrainSpec(yaml, source);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.value_or(TrainSpec{});
}

inline TrainSpec Job(const std::string& mesh, int steps, const std::string& opt = "adam") {
  return Parsed(mesh + "emb_dim: 32\nmlp_dim: 64\nnum_layers: 2\nglobal_batch_tokens: 64\nseed: 5\nsteps: " +
                    std::to_string(steps) + "\nopt_type: " + opt +
                    "\nlearning_rate: " + (opt == "adam" ? "0.01" : "20") + "\n",
                "test.yaml");
}

inline void ExpectEqualsReference(const v1::Job& job, const TrainSpec& spec) {
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error();
  const TrainConfig* config = &spec.config;
  ReferenceTrainer reference(*config);
  ASSERT_EQ(job.steps_size(), config->steps);
  for (const v1::TrainStep& step : job.steps()) {
    const double want = reference.Step().loss;
    EXPECT_NEAR(step.loss(), want, 1e-5 * want) << "step " << step.step();
    EXPECT_GT(step.emulated_step_s(), 0);
    EXPECT_GT(step.mfu(), 0);
    EXPECT_LE(step.mfu(), 1);
  }
  const double squares = SumOfSquares(reference.weights());
  EXPECT_NEAR(job.train_summary().param_l2(), std::sqrt(squares), 1e-5 * std::sqrt(squares));
}

}  // namespace tpuemu
