#include "coordinator/fan_out.h"

#include <algorithm>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/wire/run_number.h"

namespace tpuemu {

absl::Status FanOut(const std::vector<RegisteredWorker>& workers, const FanOutCalls& job,
                    std::vector<ChipCheck>& checks, std::vector<HostMemoryUse>& memory) {
  // Every worker prepares its chips' buffers, then all run their share at
  // once. The first failure ends the job (on_failure): the others' calls are
  // cancelled and they are told to abort, so that nobody waits for data that
  // will never come, nor for a worker that does not answer.
  Cancellation& calls = *job.calls;
  std::mutex result_mu;
  absl::Status first_error = absl::OkStatus();
  auto fail = [&](int host, const absl::Status& status) {
    std::lock_guard<std::mutex> lock(result_mu);
    if (first_error.ok()) first_error = job.on_failure(host, status);
  };
  auto on_every_worker = [&](const std::function<void(int, uint64_t, WorkerInterface&)>& fn) {
    std::vector<std::thread> threads;
    for (const RegisteredWorker& w : workers) threads.emplace_back([&] { fn(w.host, w.incarnation, *w.worker); });
    // Each returns promptly once `calls` is cancelled.
    for (auto& t : threads) t.join();
  };
  auto ended = [&] { return !first_error.ok() || calls.cancelled(); };
  auto end_status = [&] {
    return first_error.ok() ? absl::CancelledError(absl::StrCat(RunName(job.job), " was ended")) : first_error;
  };
  on_every_worker([&](int host, uint64_t incarnation, WorkerInterface& worker) {
    if (auto s = worker.PrepareJob(incarnation, job.job, *job.spec, job.placement, calls); !s.ok()) fail(host, s);
  });
  if (ended()) return end_status();
  for (int step = job.first_step; step < job.steps; ++step) {
    // Read once per step: every worker runs it with the same faults.
    const Faults added = job.added_faults ? job.added_faults(step) : Faults{};
    std::vector<ChipRunResult> chips;
    on_every_worker([&](int host, uint64_t incarnation, WorkerInterface& worker) {
      auto r = worker.RunJob(incarnation, job.job, step, added, calls);
      if (!r.ok()) return fail(host, r.status());
      std::lock_guard<std::mutex> lock(result_mu);
      chips.insert(chips.end(), r->begin(), r->end());
    });
    if (ended()) return end_status();
    // In chip order, not the order the hosts answered in: sums over chips
    // (the loss) then come out the same bit for bit every run.
    std::sort(chips.begin(), chips.end(), [](const ChipRunResult& a, const ChipRunResult& b) { return a.chip < b.chip; });
    if (auto s = job.on_step(step, std::move(chips)); !s.ok()) return s;
  }
  // Checking starts only once every worker has stopped moving data.
  on_every_worker([&](int host, uint64_t incarnation, WorkerInterface& worker) {
    auto r = worker.CheckJob(incarnation, job.job, calls);
    if (!r.ok()) return fail(host, r.status());
    std::lock_guard<std::mutex> lock(result_mu);
    checks.insert(checks.end(), r->chips.begin(), r->chips.end());
    r->memory.host = host;
    memory.push_back(r->memory);
  });
  std::sort(checks.begin(), checks.end(), [](const ChipCheck& a, const ChipCheck& b) { return a.chip < b.chip; });
  std::sort(memory.begin(), memory.end(),
            [](const HostMemoryUse& a, const HostMemoryUse& b) { return a.host < b.host; });
  return first_error;
}

}  // namespace tpuemu
