#include "core/collective/chip_program.h"

#include <map>

#include "core/base/interval_max.h"

namespace tpuemu {
namespace {

// Cuts a transfer's ranges into chunks of at most `limit` elements.
std::vector<std::vector<Range>> Chunks(const std::vector<Range>& ranges, uint64_t limit) {
  std::vector<std::vector<Range>> chunks(1);
  uint64_t room = limit;
  for (Range r : ranges) {
    while (r.len > 0) {
      if (room == 0) {
        chunks.emplace_back();
        room = limit;
      }
      const uint64_t take = std::min(room, r.len);
      chunks.back().push_back({r.offset, take});
      r.offset += take;
      r.len -= take;
      room -= take;
    }
  }
  return chunks;
}

uint64_t Elements(const std::vector<Range>& ranges) {
  uint64_t n = 0;
  for (const Range& r : ranges) n += r.len;
  return n;
}

}  // namespace

uint64_t ChunkTag(int step, Axis axis, int dir, uint32_t chunk) {
  const uint64_t link = static_cast<uint64_t>(axis) * 2 + (dir > 0 ? 1 : 0);
  return (static_cast<uint64_t>(step) << 40) | (link << 32) | chunk;
}

ChipProgram BuildChipProgram(const CollectivePlan& plan, int chip, uint64_t chunk_elements) {
  ChipProgram prog;
  IntervalMax<int> last_writer(-1);
  // Per part: the last receive of each stage. A stage begins on this chip once
  // every receive of the part's earlier stages is done (the DCN phase of a
  // hierarchical collective waits for the ICI phases before it; an
  // AllReduce's AllGather for its ReduceScatter). Within a stage, a phase's
  // sends wait only for the data they carry.
  std::map<int, std::map<int, int>> last_recv_of_stage;
  auto stage_barrier = [&](int part, int stage) {
    int barrier = -1;
    for (const auto& [st, index] : last_recv_of_stage[part]) {
      if (st < stage) barrier = std::max(barrier, index);
    }
    return barrier;
  };
  const auto& transfers = plan.transfers();
  // Transfers are sorted by step. Within a step, sends read what earlier steps
  // wrote, so all of a step's sends are placed before its receives update the
  // writer map. Receives of one step are interleaved chunk by chunk across
  // links, the order in which they arrive, so that reductions from both
  // directions share the vector unit fairly instead of one direction waiting
  // for the other's whole message.
  size_t i = 0;
  while (i < transfers.size()) {
    size_t j = i;
    while (j < transfers.size() && transfers[j].step == transfers[i].step) ++j;
    for (bool sending : {true, false}) {
      struct Mine {
        const PlannedTransfer* tr;
        std::vector<std::vector<Range>> chunks;
        uint32_t first_tag;  // a link may carry two transfers in one step
      };
      std::vector<Mine> mine;
      std::map<std::pair<int, int>, uint32_t> tags_used;  // per link (axis, dir) this step
      size_t most = 0;
      for (size_t t = i; t < j; ++t) {
        const PlannedTransfer& tr = transfers[t];
        if ((sending ? tr.src : tr.dst) != chip) continue;
        uint32_t& used = tags_used[{static_cast<int>(tr.axis), tr.dir}];
        mine.push_back({&tr, Chunks(tr.ranges, chunk_elements), used});
        used += static_cast<uint32_t>(mine.back().chunks.size());
        most = std::max(most, mine.back().chunks.size());
      }
      for (uint32_t c = 0; c < most; ++c) {
        for (const auto& [tr, chunks, first_tag] : mine) {
          if (c >= chunks.size()) continue;
          ChunkOp op{sending ? tr->dst : tr->src, tr->axis, tr->dir, ChunkTag(tr->step, tr->axis, tr->dir, first_tag + c),
                     tr->reduce, chunks[c], Elements(chunks[c]), -1, -1};
          if (sending) {
            op.barrier_recv = stage_barrier(tr->part, tr->stage);
            op.after_recv = op.barrier_recv;
            if (tr->after_all_before) op.after_recv = static_cast<int>(prog.recvs.size()) - 1;
            for (const Range& r : op.ranges) {
              op.after_recv = std::max(op.after_recv, last_writer.Max(r.offset, r.end()));
            }
            prog.sends.push_back(std::move(op));
          } else {
            const int index = static_cast<int>(prog.recvs.size());
            for (const Range& r : op.ranges) last_writer.Assign(r.offset, r.end(), index);
            last_recv_of_stage[tr->part][tr->stage] = index;
            prog.recvs.push_back(std::move(op));
          }
        }
      }
    }
    i = j;
  }
  return prog;
}

}  // namespace tpuemu
