#include "core/host/job.h"

#include <atomic>
#include <exception>
#include <latch>
#include <new>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/wire/run_number.h"

namespace tpuemu {

namespace {
std::atomic<int> live_host_jobs{0};
}  // namespace

HostJob::HostJob(HostNetwork& net, uint64_t job, uint64_t max_buffered_bytes) : net_(net), job_(job) {
  net_.mailbox().OpenJob(job_, max_buffered_bytes);
  ++live_host_jobs;
}

HostJob::~HostJob() {
  net_.mailbox().CloseJob(job_);
  --live_host_jobs;
}

absl::Status HostJob::AddFaults(const Faults& added) {
  if (added.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError("only training jobs take faults while they run (`tpuemu fault`)");
}

int LiveHostJobs() { return live_host_jobs.load(); }

void OnThreads(size_t n, const std::function<void(size_t)>& fn) {
  std::vector<std::exception_ptr> thrown(n);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      try {
        fn(i);
      } catch (...) {
        thrown[i] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const std::exception_ptr& e : thrown) {
    if (e) std::rethrow_exception(e);
  }
}

absl::StatusOr<std::vector<ChipRunResult>> RunChips(HostNetwork& net, const RunOptions& options, size_t n,
                                                    const std::function<absl::Status(size_t)>& move,
                                                    const std::function<absl::StatusOr<ChipRunResult>(size_t)>& report) {
  std::vector<absl::Status> moved(n);
  // Every chip starts moving once all their threads exist, as ranks start
  // after a barrier: otherwise the first chip's time would include the
  // creation of the others' threads.
  std::latch started(static_cast<std::ptrdiff_t>(n));
  OnThreads(n, [&](size_t i) {
    started.arrive_and_wait();
    // A chip that runs out of memory fails the job like any other error, so
    // that the job's other chips stop waiting for it at once.
    try {
      moved[i] = move(i);
    } catch (const std::bad_alloc&) {
      moved[i] = absl::ResourceExhaustedError(
          absl::StrCat("chip ", net.local_chips()[i], " ran out of host memory while running ", RunName(options.job)));
    }
    if (!moved[i].ok()) {
      options.abort->Abort(moved[i]);
      net.mailbox().AbortJob(options.job, moved[i]);
    }
  });
  std::vector<ChipRunResult> out;
  absl::Status first = absl::OkStatus();
  for (size_t i = 0; i < n && first.ok(); ++i) {
    auto r = moved[i].ok() ? report(i) : absl::StatusOr<ChipRunResult>(moved[i]);
    if (r.ok()) out.push_back(*std::move(r)); else first = r.status();
  }
  net.ForgetJob(options.job);
  if (!first.ok()) return first;
  return out;
}

}  // namespace tpuemu
