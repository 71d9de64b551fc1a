#include "core/train/mesh_comm.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "core/collective/tensor_collective.h"
#include "core/train/permute.h"

namespace tpuemu {
namespace {

// Chunk tags: 11 bits of collective number above the collective's own step.
constexpr int kTagShift = 52;
constexpr int kCollectiveTags = 2047;

uint64_t BytesSent(const LinkClocks& links) {
  uint64_t sent = 0;
  for (const auto& [_, link] : links) sent += static_cast<uint64_t>(link.bytes_sent());
  return sent;
}

// One span per link track for `chunks`, from its first chunk's start to its
// last one's end, with their bytes, named `what` and the count.
void AppendPerLink(const std::vector<TraceEvent>& chunks, const std::string& what, std::vector<TraceEvent>* out) {
  std::map<std::string, std::pair<TraceEvent, int>> by_track;
  for (const TraceEvent& e : chunks) {
    auto [it, fresh] = by_track.try_emplace(e.track, e, 0);
    TraceEvent& span = it->second.first;
    if (!fresh) {
      span.start_s = std::min(span.start_s, e.start_s);
      span.end_s = std::max(span.end_s, e.end_s);
      span.bytes += e.bytes;
    }
    ++it->second.second;
  }
  for (auto& [track, entry] : by_track) {
    entry.first.name = absl::StrCat(what, " (", entry.second, " chunks)");
    out->push_back(std::move(entry.first));
  }
}

}  // namespace

MeshComm::MeshComm(const TrainConfig& config, const TrainMesh& mesh, int chip, HostNetwork& net, uint64_t job,
                   std::shared_ptr<JobAbort> abort, StepClock& clock)
    : c_(config), mesh_(mesh), chip_(chip), net_(net), job_(job), abort_(std::move(abort)), clock_(clock) {}

void MeshComm::Start() {
  links_.clear();
  collectives_ = 0;
}

absl::StatusOr<const CollectivePlan*> MeshComm::PlanFor(CollectiveOp op, MeshAxisKind axis, uint64_t elements) {
  const int step = clock_.step();
  auto [it, fresh] =
      plans_.try_emplace({static_cast<int>(op), static_cast<int>(axis), elements, c_.faults.DownAt(step)});
  std::unique_ptr<CollectivePlan>& slot = it->second;
  if (fresh) {
    auto plan = PlanMeshCollective(c_, mesh_, net_.topology(), op, axis, elements, {chip_}, step);
    if (!plan.ok()) {
      plans_.erase(it);
      return absl::Status(plan.status().code(), absl::StrCat(c_.name, ": step ", step, ": ", OpName(op), " over ",
                                                            MeshAxisName(axis), ": ", plan.status().message()));
    }
    slot = std::make_unique<CollectivePlan>(*std::move(plan));
  }
  return slot.get();
}

RunOptions MeshComm::Options() {
  RunOptions options;
  options.job = job_;
  options.abort = abort_;
  options.trace = clock_.trace();
  options.wire_bf16 = c_.wire_dtype_bytes == 2;
  options.faults = &c_.faults;
  options.step = clock_.step();
  return options;
}

absl::Status MeshComm::Collective(CollectiveOp op, MeshAxisKind axis, LocalTensor& t, int dim, double* ready) {
  const int n = mesh_.size(axis);
  const double start = ready != nullptr ? std::max(clock_.now(), *ready) : clock_.now();
  if (ready != nullptr) *ready = start;
  if (n == 1) return absl::OkStatus();
  const int64_t local = t.elements();
  const uint64_t elements = static_cast<uint64_t>(op == CollectiveOp::kAllGather ? local * n : local);
  auto found = PlanFor(op, axis, elements);
  if (!found.ok()) return found.status();
  RunOptions options = Options();
  // Numbers wrap long after a collective's chunks are all delivered; tags
  // never reach the permutes' top bit.
  options.tag_base = static_cast<uint64_t>(1 + collectives_++ % kCollectiveTags) << kTagShift;
  const uint64_t sent_before = BytesSent(links_);
  // A shape-only job's links get a span per collective, not per chunk: a
  // big model's step sends millions of chunks (docs/simulate.md).
  std::vector<TraceEvent> chunks;
  if (c_.shape_only() && options.trace != nullptr) options.trace = &chunks;
  auto report = RunTensorCollective(**found, chip_, net_, options, &links_, start, t, dim);
  if (!report.ok()) return report.status();
  AppendPerLink(chunks, absl::StrCat(OpName(op), " ", MeshAxisName(axis)), clock_.trace());
  const uint64_t sent = BytesSent(links_) - sent_before;
  const double end = report->emulated_s;
  clock_.Transferred(axis, start, end, sent);
  clock_.Span(absl::StrCat(OpName(op), " ", MeshAxisName(axis), ready != nullptr ? " (ahead)" : ""), start, end, sent);
  if (ready != nullptr) {
    *ready = end;  // issued ahead: the chip carries on meanwhile
  } else {
    clock_.Blocked(axis, end);
  }
  return absl::OkStatus();
}

absl::Status MeshComm::Send(const StageLink& to, uint64_t tag, const LocalTensor& t) {
  if (const DownLink* down = c_.faults.Down(chip_, to.peer, to.axis, to.dir, clock_.step())) {
    return absl::InvalidArgumentError(absl::StrCat(c_.name, ": step ", clock_.step(), ": faults: ", down->Describe(),
                                                   ": the pipeline's send to the next stage needs it (a permute "
                                                   "between neighbouring stages has no other way round)"));
  }
  const double start = clock_.now();
  auto arrival = PermuteSend(net_, links_, Options(), chip_, to.peer, to.axis, to.dir, tag, t, c_.dtype_bytes, start);
  if (!arrival.ok()) return arrival.status();
  clock_.Transferred(MeshAxisKind::kPipeline, start, *arrival, static_cast<uint64_t>(t.elements()) * c_.dtype_bytes);
  return absl::OkStatus();
}

absl::StatusOr<double> MeshComm::Receive(int peer, uint64_t tag, LocalTensor& t) {
  return PermuteReceive(net_, Options(), chip_, peer, tag, t, c_.dtype_bytes);
}

}  // namespace tpuemu
