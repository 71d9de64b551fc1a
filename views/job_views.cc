#include "views/job_views.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "views/job_json.h"
#include "core/base/units.h"
#include "core/base/utf8.h"

namespace tpuemu {
namespace {

int OneStep(const v1::Job&) { return 1; }

std::string Correctness(bool correct, const std::string& detail) {
  return correct ? absl::StrCat("correct", detail) : absl::StrCat("WRONG", detail);
}

// A finished collective in a line or two: what `bench collective` tabulates.
void PrintCollectiveResult(const v1::Job& job) {
  if (!job.has_result()) return;
  const v1::CollectiveResult& r = job.result();
  std::printf("%s of %s over %s (%d chips, %s): emulated %s, predicted %s (ratio %.4f)%s\n", r.op().c_str(),
              FormatBytes(r.bytes()).c_str(), r.axes().c_str(), r.n(), r.algorithm().c_str(),
              FormatSeconds(r.emulated_s()).c_str(), FormatSeconds(r.predicted_s()).c_str(), r.ratio(),
              r.seed_formula_s() > 0 ? absl::StrFormat(", seed's rule %s (x%.4f)", FormatSeconds(r.seed_formula_s()),
                                                       r.seed_ratio()).c_str()
                                     : "");
  std::printf("result: %s; wall %s, busbw %.3f GB/s\n",
              Correctness(r.correct(), r.correct() ? "" : absl::StrCat(" (", r.mismatches(), " mismatches)")).c_str(),
              FormatSeconds(r.wall_s()).c_str(), r.busbw_gbps());
  if (r.faults_size() > 0) std::printf("faults and contention: %s\n", absl::StrJoin(r.faults(), "; ").c_str());
}

// A finished matmul in a line or two: what `matmul` prints after its plan.
void PrintMatmulResult(const v1::Job& job) {
  if (!job.has_matmul_result()) return;
  const v1::MatmulResult& r = job.matmul_result();
  std::printf("%s: emulated %s = compute %s + communication %s (predicted %s, ratio %.3f)\n", r.expr().c_str(),
              FormatSeconds(r.emulated_s()).c_str(), FormatSeconds(r.compute_s()).c_str(),
              FormatSeconds(r.comm_s()).c_str(), FormatSeconds(r.predicted_s()).c_str(), r.ratio());
  std::printf("result: %s against a one-device BLIS product; wall %s\n",
              Correctness(r.correct(), absl::StrFormat(", max relative error %.3g", r.max_rel_err())).c_str(),
              FormatSeconds(r.wall_s()).c_str());
}

void PrintPerLayer(const v1::TrainSummary& summary) {
  if (summary.per_layer_size() == 0) return;
  std::printf("\nper layer and chip, last step: seed 001's table vs the emulated step\n");
  int width = 34;  // the formula column: as wide as the longest
  for (const v1::LayerCost& l : summary.per_layer()) width = std::max(width, static_cast<int>(l.formula().size()));
  std::printf("  %-8s %-*s %13s %13s %12s %12s\n", "", width, "formula", "bytes pred", "bytes emu",
              "time pred", "time emu");
  for (const v1::LayerCost& l : summary.per_layer()) {
    const bool compute = l.what() == "compute";
    std::printf("  %-8s %-*s %13s %13s %12s %12s\n", l.what().c_str(), width, l.formula().c_str(),
                compute ? "" : FormatSize(l.predicted_bytes()).c_str(),
                compute ? "" : FormatSize(l.emulated_bytes()).c_str(),
                FormatSeconds(l.predicted_s()).c_str(), FormatSeconds(l.emulated_s()).c_str());
  }
  std::vector<std::string> times;
  for (const v1::LayerCost& l : summary.per_layer()) {
    if (l.what() != "compute") times.push_back(absl::StrCat(l.what(), ": ", l.time_formula()));
  }
  std::printf("  predicted times: %s\n", absl::StrJoin(times, "; ").c_str());
}

// Why a pipeline's bubble differs from the seeds' formula, when it does.
void PrintBubbleNote(const v1::Job& job) {
  if (job.steps_size() == 0) return;
  const v1::TrainStep& s = job.steps(job.steps_size() - 1);
  if (s.bubble_formula() <= 0 || std::abs(s.bubble_fraction() - s.bubble_formula()) < 0.05) return;
  std::printf("bubble %.1f%% vs formula %.1f%%: the formula counts stage hops as free; here one microbatch's hop "
              "takes %s against %s of matmuls per stage, and counting the hops gives %.1f%%\n",
              100 * s.bubble_fraction(), 100 * s.bubble_formula(), FormatSeconds(s.bubble_hop_s()).c_str(),
              FormatSeconds(s.bubble_microbatch_compute_s()).c_str(), 100 * s.bubble_with_transfers());
}

void PrintTrainStatus(const v1::Job& job) {
  std::printf("mesh %s\n", job.train_summary().mesh().c_str());
  if (job.steps_size() > 0 && job.steps(job.steps_size() - 1).faults_size() > 0) {
    const auto& faults = job.steps(job.steps_size() - 1).faults();
    std::printf("faults and contention in the latest step: %s\n", absl::StrJoin(faults, "; ").c_str());
  }
  for (const v1::MemoryUse& m : job.train_summary().memory_per_chip()) {
    std::printf("  %-17s %12s per chip\n", m.item().c_str(), FormatSize(m.bytes()).c_str());
  }
  if (job.steps_dropped() > 0) {
    std::printf("(steps 0..%lld not shown: the coordinator keeps the records of a job's latest %d steps)\n",
                static_cast<long long>(job.steps_dropped() - 1), job.steps_size());
  }
  for (const v1::TrainStep& s : job.steps()) std::printf("%s\n", StepLine(s).c_str());
  if (const double l2 = job.train_summary().param_l2(); job.state() == v1::JOB_STATE_SUCCEEDED && l2 > 0) {
    std::printf("final parameters L2 %.9g\n", l2);
  }
  PrintBubbleNote(job);
  PrintPerLayer(job.train_summary());
}

void PrintTrainSucceeded(const v1::Job& job) {
  const double l2 = job.train_summary().param_l2();
  std::printf("%s succeeded: %lld steps on %s; %s\n", job.id().c_str(), static_cast<long long>(StepsDone(job)),
              job.train_summary().mesh().c_str(),
              l2 > 0 ? absl::StrFormat("final parameters L2 %.9g", l2).c_str() : "shape-only: no values");
  PrintBubbleNote(job);
  PrintPerLayer(job.train_summary());
}

const JobView kCollective = {
    "collective",
    OneStep,
    [](const v1::Job& j) {
      return absl::StrCat(j.collective().op(), " ", FormatBytes(j.collective().bytes()), " over ",
                          absl::StrJoin(j.collective().axes(), ","));
    },
    [](const v1::Job& j, nlohmann::json& out) {
      if (j.has_result()) out["result"] = CollectiveJson(j);
    },
    PrintCollectiveResult,
    PrintCollectiveResult,
};

const JobView kMatmul = {
    "matmul",
    OneStep,
    [](const v1::Job& j) { return j.matmul().expr(); },
    [](const v1::Job& j, nlohmann::json& out) {
      if (j.has_matmul_result()) out["result"] = MatmulJson(j.matmul_result(), j.id());
    },
    PrintMatmulResult,
    PrintMatmulResult,
};

const JobView kTrain = {
    "train",
    [](const v1::Job& j) { return j.train().config().steps(); },
    // The job file's name: label, then the file (text from anyone: escaped).
    [](const v1::Job& j) {
      const std::string& name = j.train().config().name();
      return PrintableText(name.empty() || name == "job" ? j.train().source()
                                                          : absl::StrCat(name, " (", j.train().source(), ")"));
    },
    AddTrainJson,
    PrintTrainStatus,
    PrintTrainSucceeded,
};

}  // namespace

const JobView& ViewOf(const v1::Job& job) {
  switch (job.spec_case()) {
    case v1::Job::kTrain:
      return kTrain;
    case v1::Job::kMatmul:
      return kMatmul;
    case v1::Job::kCollective:
    case v1::Job::SPEC_NOT_SET:
      break;
  }
  return kCollective;
}

int64_t StepsDone(const v1::Job& job) {
  if (job.has_train()) return job.steps_dropped() + job.steps_size();
  return job.state() == v1::JOB_STATE_SUCCEEDED ? 1 : 0;  // one step, with no step records
}

std::string StepLine(const v1::TrainStep& s) {
  std::string comm;
  for (const char* axis : {"data", "fsdp", "tensor", "pipeline"}) {
    auto it = s.exposed_comm_s().find(axis);
    if (it != s.exposed_comm_s().end() && it->second > 0) absl::StrAppend(&comm, " ", axis, " ", FormatSeconds(it->second));
  }
  auto bytes = s.comm_bytes_per_chip().find("total");
  std::string line = absl::StrFormat(
      "step %4d  loss %-12s step %-9s compute %-9s comm:%-28s MFU %5.1f%%  %9.4g tok/s  sent/chip %s", s.step(),
      std::isnan(s.loss()) ? "- (shape)" : absl::StrFormat("%.6g", s.loss()), FormatSeconds(s.emulated_step_s()), FormatSeconds(s.compute_s()), comm.empty() ? " none" : comm,
      100 * s.mfu(), s.tokens_per_s_emulated(), FormatSize(bytes == s.comm_bytes_per_chip().end() ? 0 : bytes->second));
  // Paced pods only (time_scale > 0): wall time beyond emulated x scale, the
  // host not keeping up (docs/clocks.md).
  if (s.host_lag_s() > 0) {
    absl::StrAppend(&line, "  wall ", FormatSeconds(s.wall_s()), " (host lag ", FormatSeconds(s.host_lag_s()), ")");
  }
  if (s.bubble_formula() > 0) {
    absl::StrAppend(&line, absl::StrFormat("  bubble %.1f%% (formula %.1f%%, with hops %.1f%%)  activations/chip %s",
                                           100 * s.bubble_fraction(), 100 * s.bubble_formula(),
                                           100 * s.bubble_with_transfers(), FormatSize(s.peak_activation_bytes())));
  }
  return line;
}

}  // namespace tpuemu
