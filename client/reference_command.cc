#include "client/reference_command.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "client/cli_errors.h"
#include "client/job_file.h"
#include "client/progress.h"
#include "core/base/field.h"
#include "core/pod/topology.h"
#include "core/train/model.h"
#include "nlohmann/json.hpp"

namespace tpuemu {
namespace {

struct ReferenceOptions {
  std::string path;
  bool json = false;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
};

int RunReference(const ReferenceOptions& o) {
  auto job = ReadJobFile(o.path);
  if (!job.ok()) return Fail(job.status());
  const TrainConfig& config = job->config;
  if (config.shape_only()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        o.path, ": values: none: a shape-only job has no values to compute on one device; use `tpuemu simulate ",
        o.path, " --topology CHIP:SHAPE` for its emulated times, or values: real")));
  }

  // The pod's keys do not change one device's math, but a shape the pod
  // would refuse is refused here too, as the help says.
  if (!config.topology.empty()) {
    if (auto t = Topology::Create({config.topology, 1, 1, "auto"}); !t.ok()) {
      // The file's key, not the flag of the commands that take a topology.
      const std::string why = absl::StrReplaceAll(t.status().message(), {{Field("topology"), "topology:"}});
      return Fail(absl::Status(t.status().code(), absl::StrCat(o.path, ": ", why)));
    }
  }
  ReferenceTrainer trainer(config, o.threads);
  nlohmann::json steps = nlohmann::json::array();
  Progress progress(true);
  if (!o.json) {
    std::printf("%s on one device: D=%lld F=%lld L=%d B=%lld%s%s, %s\n", config.name.c_str(),
                static_cast<long long>(config.emb_dim), static_cast<long long>(config.mlp_dim), config.num_layers,
                static_cast<long long>(config.global_batch_tokens),
                config.attention() ? absl::StrCat(", attention Nq=", config.num_query_heads, " Nkv=", config.num_kv_heads,
                                                  " H=", config.head_dim, " S=", config.seq_len)
                                         .c_str()
                                   : "",
                config.embeddings() ? absl::StrCat(", vocabulary V=", config.vocab_size, " (cross-entropy)").c_str() : "",
                config.opt_type.c_str());
  }
  for (int s = 0; s < config.steps; ++s) {
    progress.Update(absl::StrCat(config.name, ": step ", s + 1, " of ", config.steps));
    const StepRecord r = trainer.Step();
    steps.push_back({{"step", r.step}, {"loss", r.loss}});
    if (!o.json) {
      progress.Done();
      std::printf("step %4d  loss %.9g\n", r.step, r.loss);
    }
  }
  progress.Done();
  const double sq = SumOfSquares(trainer.weights());
  if (o.json) {
    std::cout << nlohmann::json{{"name", config.name}, {"steps", steps}, {"param_l2", std::sqrt(sq)}}.dump(2)
              << "\n";
  } else {
    std::printf("final parameters: L2 norm %.9g\n", std::sqrt(sq));
  }
  return 0;
}

}  // namespace

std::string JobKeysHelp() {
  std::string out = "Job file keys (flat YAML; MaxText's names where the concept is the same):\n";
  for (const TrainKey& k : TrainKeys()) {
    out += absl::StrFormat("  %-26s %-7s %-12s %s\n", k.name, k.type, k.default_text, WithFlagNames(k.doc));
  }
  return out;
}

void AddReferenceCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<ReferenceOptions>();
  auto* c = app.add_subcommand("reference", "run a training job on one device, in this process, no pod needed");
  c->footer(
      "Seed 001's simplified Transformer (L blocks of In[B,D] * Win[D,F] -> activation -> * Wout[F,D])\n"
      "against a fixed random teacher, MSE loss (with vocab_size: token ids embedded and a cross-entropy\n"
      "after the vocabulary projection), SGD or Adam, fp32. Prints the loss of every step. Keys\n"
      "about the pod (mesh, topology, time_scale, wire_dtype, fsdp_prefetch, hbm_bytes) are checked but\n"
      "do not change one device's math. Example:\n"
      "  tpuemu reference examples/jobs/dp.yaml\n\n" +
      JobKeysHelp());
  c->add_option("job", o->path, "JOB.yaml, the job file")->required();
  c->add_flag("--json", o->json, "print {name, steps: [{step, loss}], param_l2} for scripts");
  c->add_option("--threads", o->threads,
                "threads for the multiplies and elementwise work (default: every core); the results are the same "
                "bit for bit with any number")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  c->callback([o, exit_code] { *exit_code = RunReference(*o); });
}

}  // namespace tpuemu
