#include "client/plan_command.h"

#include <cmath>
#include <cstdio>
#include <iostream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli_errors.h"
#include "client/job_file.h"
#include "client/plan_verify.h"
#include "core/base/units.h"
#include "core/plan/planner.h"
#include "nlohmann/json.hpp"

namespace tpuemu {
namespace {

struct PlanOptions {
  std::string model, topology, batch;
  int slices = 1, chips_per_host = 4, top = 0, verify = 0;
  bool chips_per_host_given = false;
  bool json = false;
};

// "3M", "1.5e6", "16000000": tokens, K/M/B as thousands, millions, billions.
absl::StatusOr<double> ParseTokens(const std::string& text) {
  std::string s = absl::AsciiStrToUpper(text);
  double scale = 1;
  if (!s.empty() && (s.back() == 'K' || s.back() == 'M' || s.back() == 'B')) {
    scale = s.back() == 'K' ? 1e3 : s.back() == 'M' ? 1e6 : 1e9;
    s.pop_back();
  }
  double v = 0;
  // At most a trillion: real global batches are millions of tokens, and 1e30
  // printed 1e26-GB rows.
  const bool parsed = absl::SimpleAtod(s, &v);
  // Whole within rounding: 1.1M is 1100000, not 1100000.0000000002.
  const double whole = std::round(v * scale);
  const bool is_whole = std::abs(v * scale - whole) <= 1e-9 * whole;
  v = whole;
  if (!parsed || !(v >= 1) || !(v <= 1e12) || !is_whole) {
    return absl::InvalidArgumentError(absl::StrCat("--batch-tokens '", text,
                                                   "': the global batch in whole tokens, from 1 to 1e12, such as 3M, "
                                                   "1.5e6 or 16000000 (suffixes K, M and B: thousands, millions, "
                                                   "billions)"));
  }
  return v;
}

std::string Tokens(double t) {
  if (t == 0) return "never";
  if (!std::isfinite(t)) return "always";
  return absl::StrFormat("%.3g", t);
}

nlohmann::json ToJson(const MeshPlan& p) {
  nlohmann::json memory = nlohmann::json::array();
  for (const PlanMemoryItem& m : p.memory) memory.push_back({{"what", m.what}, {"bytes", m.bytes}});
  return {{"strategy", p.strategy},
          {"mesh", p.mesh},
          {"data", p.data},
          {"tensor", p.tensor},
          {"data_axes", p.data_axes},
          {"tensor_axes", p.tensor_axes},
          {"data_links", p.data_links},  // M_X: the axes counted by their links (a line is less than 1)
          {"tensor_links", p.tensor_links},
          {"fsdp", p.fsdp},
          {"stages", p.stages},
          {"microbatches", p.microbatches},
          {"memory", memory},
          {"memory_bytes", p.memory_bytes},
          {"fits", p.fits},
          {"compute_s", p.compute_s},
          {"comms_s", p.comms_s},
          {"dcn_s", p.dcn_s},
          {"step_s", p.step_s},
          {"mfu", p.mfu},
          {"comms_bound", p.comms_bound},
          {"ici_bound", p.ici_bound},
          // JSON has no infinity: null where no batch is compute-bound.
          {"critical_batch_tokens",
           std::isfinite(p.critical_batch_tokens) ? nlohmann::json(p.critical_batch_tokens) : nlohmann::json()},
          {"dcn_critical_batch_tokens",
           p.dcn_critical_batch_tokens > 0 ? nlohmann::json(p.dcn_critical_batch_tokens) : nlohmann::json()},
          {"why", p.why}};
}

void PrintVerified(const std::vector<Verified>& verified, const std::vector<MeshPlan>& plans) {
  std::printf("\nverify: the top %zu meshes' MLP blocks, shape-only on the emulated pod, beside the formulas for the "
              "same blocks\n(attention and the vocabulary are in neither column: both sides are the model's MLP blocks "
              "alone)\n",
              verified.size());
  std::printf("%-3s %-44s %10s %10s %7s %10s %10s %10s %10s\n", "#", "ran on", "step pred", "step emu", "emu/pred",
              "compute p", "compute e", "comms p", "comms e");
  for (size_t i = 0; i < verified.size(); ++i) {
    const Verified& v = verified[i];
    if (!v.ran) {
      std::printf("%-3zu %s: not run: %s\n", i + 1, plans[i].mesh.c_str(), v.why_not.c_str());
      continue;
    }
    std::printf("%-3zu %-44s %10s %10s %7.3f %10s %10s %10s %10s\n", i + 1, v.job_mesh.c_str(),
                FormatSeconds(v.predicted.step_s).c_str(), FormatSeconds(v.step_s).c_str(),
                v.step_s / v.predicted.step_s, FormatSeconds(v.predicted.compute_s).c_str(),
                FormatSeconds(v.compute_s).c_str(), FormatSeconds(v.predicted.comms_s + v.predicted.dcn_s).c_str(),
                FormatSeconds(v.busy_comm_s).c_str());
  }
  for (const Verified& v : verified) {
    if (!v.ran) continue;
    std::printf("(emulated comms: every collective's time on its links, hidden or not; %s, batch %.0f tokens; a "
                "step above the formulas' is transfers the chips waited for)\n",
                v.engine.c_str(), v.batch_tokens);
    break;
  }
}

// The model a job file trains (`plan --model examples/jobs/llama3-70b.yaml`):
// its sizes, whatever else the file says; NotFound when the path holds no
// job.
absl::StatusOr<ModelShape> ModelOfJob(const std::string& path) {
  auto job = ReadJobFile(path, /*shape_only=*/true);
  if (!job.ok()) return absl::NotFoundError(job.status().message());
  const TrainConfig& c = job->config;
  ModelShape m;
  m.name = path;
  m.layers = c.num_layers;
  m.emb_dim = c.emb_dim;
  m.mlp_dim = c.mlp_dim;
  m.query_heads = c.num_query_heads;
  m.kv_heads = c.num_kv_heads;
  m.head_dim = c.head_dim;
  m.vocab = c.vocab_size;
  m.seq_len = c.seq_len;
  m.mlp_matrices = c.gated_mlp ? 3 : 2;
  if (auto s = CheckModelShape(m, path); !s.ok()) return s;
  return m;
}

int RunPlan(const PlanOptions& o) {
  auto model = LoadModel(o.model);
  if (!model.ok()) {
    // Not a model file: perhaps a job file, whose model is planned.
    auto of_job = ModelOfJob(o.model);
    if (!of_job.ok() && absl::IsNotFound(of_job.status())) return Fail(model.status());
    model = std::move(of_job);
  }
  if (!model.ok()) return Fail(model.status());
  auto tokens = ParseTokens(o.batch);
  if (!tokens.ok()) return Fail(tokens.status());
  auto topo = Topology::Create({o.topology, o.slices, o.chips_per_host, "auto"});
  if (!topo.ok()) return Fail(SayingTheDefaultChipsPerHost(topo.status(), o.chips_per_host, o.chips_per_host_given));
  auto plans = PlanMeshes({*model, *tokens}, *topo);
  if (!plans.ok()) return Fail(plans.status());
  const ChipProfile& chip = topo->profile();
  // Every mesh verified is shown: --verify 3 with --top 1 shows three.
  const size_t shown = o.top > 0 ? std::min<size_t>(std::max(o.top, o.verify), plans->size()) : plans->size();
  std::vector<Verified> verified;
  for (int i = 0; i < std::min<int>(o.verify, static_cast<int>(plans->size())); ++i) {
    if (!o.json) std::fprintf(stderr, "verifying %d of %d: %s\n", i + 1, o.verify, (*plans)[i].mesh.c_str());
    verified.push_back(VerifyPlan((*plans)[i], *model, *topo, *tokens));
  }
  if (o.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (size_t i = 0; i < shown; ++i) {
      rows.push_back(ToJson((*plans)[i]));
      if (i < verified.size()) rows.back()["verify"] = VerifiedJson(verified[i]);
    }
    std::cout << nlohmann::json{{"model", model->name},
                                {"params", model->Params()},
                                {"topology", topo->Describe()},
                                {"chips", topo->num_chips()},
                                {"batch_tokens", *tokens},
                                {"ici_intensity", IciIntensity(chip)},
                                {"plans", rows}}
                     .dump(2)
              << "\n";
    return 0;
  }
  std::printf("%s: %.3g parameters (MLP %.3g with %d matrices, attention %.3g, vocabulary %.3g); L=%lld D=%lld "
              "F=%lld\n",
              model->name.c_str(), model->Params(), model->MlpParams(), model->mlp_matrices, model->AttentionParams(),
              model->VocabParams(), static_cast<long long>(model->layers), static_cast<long long>(model->emb_dim),
              static_cast<long long>(model->mlp_dim));
  std::printf("%s: %d chips, %.3g GB HBM and C = %.3g FLOP/s each; alpha = C / W_ici = %.0f; batch %.3g tokens\n\n",
              topo->Describe().c_str(), topo->num_chips(), chip.hbm_bytes / 1e9, chip.flops_bf16, IciIntensity(chip),
              *tokens);
  std::printf("%-3s %-8s %-66s %9s %5s %9s %9s %9s %9s %5s %-7s %9s\n", "#", "strategy", "mesh", "HBM/chip", "fits",
              "step", "compute", "ICI", "DCN", "MFU", "bound", "turns at");
  for (size_t i = 0; i < shown; ++i) {
    const MeshPlan& p = (*plans)[i];
    std::printf("%-3zu %-8s %-66s %6.1f GB %5s %9s %9s %9s %9s %4.0f%% %-7s %9s\n", i + 1, p.strategy.c_str(),
                p.mesh.c_str(), p.memory_bytes / 1e9, p.fits ? "yes" : "no", FormatSeconds(p.step_s).c_str(),
                FormatSeconds(p.compute_s).c_str(), FormatSeconds(p.comms_s).c_str(), p.dcn_s > 0 ? FormatSeconds(p.dcn_s).c_str() : "-",
                100 * p.mfu, p.comms_bound ? "comms" : "compute", Tokens(p.critical_batch_tokens).c_str());
  }
  std::printf("\nwhy:\n");
  for (size_t i = 0; i < shown; ++i) {
    std::printf("  %zu %s %s: %s\n", i + 1, (*plans)[i].strategy.c_str(), (*plans)[i].mesh.c_str(),
                (*plans)[i].why.c_str());
  }
  if (!verified.empty()) PrintVerified(verified, *plans);
  const MeshPlan& best = plans->front();
  if (best.fits) {
    std::printf("\nchoice: %s, %s: a step of %s at %.0f%% MFU%s.\n", best.strategy.c_str(), best.mesh.c_str(),
                FormatSeconds(best.step_s).c_str(), 100 * best.mfu,
                best.comms_bound ? ", communication-bound: a larger batch per chip, or fewer chips, would help"
                                 : ", compute-bound");
  } else {
    std::printf("\nnothing fits: every mesh needs more than %.3g GB of HBM per chip; use more chips or slices\n",
                chip.hbm_bytes / 1e9);
  }
  return 0;
}

}  // namespace

void AddPlanCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<PlanOptions>();
  auto* c = app.add_subcommand("plan", "which mesh for a model on a pod, by seed 001's formulas; no pod needed");
  c->footer(
      "Every strategy seed 001 discusses (DP, FSDP, tensor parallelism, FSDP with tensor-parallel axes or\n"
      "sub-rings, pipeline stages with FSDP, data parallelism over DCN between slices), each with its HBM\n"
      "per chip, compute and communication per step, MFU, whether it is communication-bound and the global\n"
      "batch below which it turns so, ranked by step time. Formulas only: nothing runs (docs/plan.md).\n"
      "Examples:\n"
      "  tpuemu plan --model llama2-13b --topology v5p:16x16x16 --batch-tokens 3M\n"
      "  tpuemu plan --model llama3-70b --topology v5p:16x20x28 --slices 2 --batch-tokens 16M --json");
  c->add_option("--model", o->model, "a preset (llama2-7b, llama2-13b, llama3-8b, llama3-70b), a YAML file with "
                                     "model: PRESET and MaxText's keys (base_emb_dim, base_mlp_dim, ...), or a job "
                                     "file (its model; the rest is not read)")
      ->required();
  c->add_option("--topology", o->topology, "CHIP:SHAPE of one slice, e.g. v5p:16x16x16")->required();
  c->add_option("--slices", o->slices, "slices joined by DCN (data parallel between them)")
      ->check(CLI::Range(1, kMaxSlices))
      ->capture_default_str();
  c->add_option("--chips-per-host", o->chips_per_host, "chips per host (each host's DCN bandwidth is shared by them)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  c->add_option("--batch-tokens", o->batch, "the global batch in tokens, e.g. 3M or 1.5e6")->required();
  c->add_option("--top", o->top, "show the best K meshes only (default: all; at least those --verify runs)")->check(CLI::Range(1, 1000));
  c->add_option("--verify", o->verify,
                "run the best K meshes' MLP blocks shape-only on the emulated pod (tpuemu simulate's engine) and print "
                "the emulated step beside the formulas'")
      ->check(CLI::Range(1, 20));
  c->add_flag("--json", o->json,
              "print {model, params, topology, chips, batch_tokens, ici_intensity, plans: [...]} (with --verify, the "
              "first K plans carry a verify object)");
  c->callback([o, c, exit_code] {
    o->chips_per_host_given = c->count("--chips-per-host") > 0;
    *exit_code = RunPlan(*o);
  });
}

}  // namespace tpuemu
