#include "core/collective/start_barrier.h"

#include <map>
#include <set>

#include "core/collective/executor.h"

namespace tpuemu {

int StartBarrierRounds(const CollectivePlan& plan) {
  // The plan's links along its axes make a torus (or a product of lines):
  // its longest shortest path is the sum of each axis's. A host holds only
  // its own chips' transfers (CollectivePlan::CreateFor), so this counts from
  // the axes, which every host sees whole.
  int rounds = 0;
  for (const AxisPlan& a : plan.axes()) {
    const bool both_ways = a.algorithm == RingAlgorithm::kBiRing && a.way == 0;
    rounds += both_ways ? a.size / 2 : a.size - 1;
  }
  return rounds;
}

absl::Status StartTogether(HostNetwork& net, const RunOptions& options, int chip, const ChipProgram& program,
                           int rounds) {
  // One frame per peer and round, over the first link the program uses to
  // it (two links to one peer, as on a ring of two, would give its mailbox
  // two frames under one key).
  std::map<int, LinkSender*> to;
  for (const ChunkOp& op : program.sends) {
    if (to.count(op.peer)) continue;
    auto link = OutgoingLink(net, chip, op.axis, op.dir, op.peer);
    if (!link.ok()) return link.status();
    to[op.peer] = *link;
  }
  std::set<int> from;
  for (const ChunkOp& op : program.recvs) from.insert(op.peer);
  for (int round = 0; round < rounds; ++round) {
    const uint64_t tag = kStartBarrierTagBit | options.tag_base | static_cast<uint64_t>(round);
    for (const auto& [peer, link] : to) {
      Frame frame;
      frame.header = {options.job, chip, peer, tag, 0, 0, 0, 0};
      if (!link->Enqueue(std::move(frame), options.abort.get())) return options.abort->status();
    }
    for (int peer : from) {
      if (auto frame = net.mailbox().Take(options.job, chip, peer, tag, options.recv_timeout); !frame.ok()) {
        return frame.status();
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace tpuemu
