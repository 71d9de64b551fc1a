#include "core/collective/executor.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/collective/chip_program.h"
#include "core/collective/data.h"
#include "core/collective/start_barrier.h"
#include "core/base/interval_max.h"
#include "core/pod/link_clock.h"

namespace tpuemu {

float RoundToBf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  if ((u & 0x7f800000u) == 0x7f800000u) return x;  // inf and NaN stay as they are
  u += 0x7fffu + ((u >> 16) & 1u);                  // round to nearest, ties to even
  u &= 0xffff0000u;
  std::memcpy(&x, &u, sizeof(x));
  return x;
}

absl::StatusOr<LinkSender*> OutgoingLink(HostNetwork& net, int chip, Axis axis, int dir, int peer) {
  LinkSender* link = net.Link(chip, axis, dir);
  if (link == nullptr) {
    return absl::InternalError(absl::StrCat("chip ", chip, " has no ", AxisName(axis), dir > 0 ? "+" : "-",
                                            " link to chip ", peer));
  }
  return link;
}

absl::StatusOr<BookedChunk> BookChunk(HostNetwork& net, LinkClocks& links, const RunOptions& options, int chip,
                                      int peer, Axis axis, int dir, uint64_t tag,
                                      const std::shared_ptr<float[]>& buffer, const std::vector<Range>& ranges,
                                      int dtype_bytes, double ready, const std::string& what,
                                      const TransitBytes* transit) {
  auto sender = OutgoingLink(net, chip, axis, dir, peer);
  if (!sender.ok()) return sender.status();
  uint64_t elements = 0;
  for (const Range& r : ranges) elements += r.len;
  const double emu_bytes = static_cast<double>(elements) * dtype_bytes;
  const LinkParams base = net.topology().Link(axis);
  const LinkParams params =
      options.faults != nullptr ? options.faults->Link(base, chip, peer, axis, dir, options.step) : base;
  auto [it, _] = links.try_emplace({static_cast<int>(axis), dir}, params);
  it->second.set_params(params);
  const EmuLink::Booking booking = it->second.Book(emu_bytes, ready);
  const bool degraded = params.bw_dir != base.bw_dir || params.latency != base.latency;
  if (options.trace != nullptr) {
    options.trace->push_back({absl::StrCat("link ", chip, "->", peer, " ", AxisName(axis), dir > 0 ? "+" : "-"),
                              degraded ? absl::StrCat(what, " (slow link)") : what, booking.start, booking.end,
                              static_cast<uint64_t>(emu_bytes)});
  }
  Frame frame;
  frame.header = {options.job, chip, peer, tag, booking.arrival, static_cast<uint64_t>(emu_bytes), 0, 0};
  frame.pace_bandwidth = params.bw_dir / base.bw_dir;
  frame.pace_extra_latency_s = params.latency - base.latency;
  if (buffer == nullptr) {
    // Shape-only: the header's emulated bytes are all the frame carries.
  } else if (options.wire_bf16) {
    frame.payload.resize(elements);
    float* out = frame.payload.data();
    for (const Range& r : ranges) {
      for (uint64_t i = 0; i < r.len; ++i) *out++ = RoundToBf16(buffer[r.offset + i]);
    }
  } else {
    static const TransitBytes kNothingHeld;
    for (const Range& r : ranges) (transit != nullptr ? *transit : kNothingHeld).Lend(buffer, r, &frame.lent);
  }
  return BookedChunk{*sender, std::move(frame), booking};
}

absl::StatusOr<EmuLink::Booking> SendChunk(HostNetwork& net, LinkClocks& links, const RunOptions& options, int chip,
                                           int peer, Axis axis, int dir, uint64_t tag,
                                           const std::shared_ptr<float[]>& buffer, const std::vector<Range>& ranges,
                                           int dtype_bytes, double ready, const std::string& what,
                                           const TransitBytes* transit) {
  auto chunk =
      BookChunk(net, links, options, chip, peer, axis, dir, tag, buffer, ranges, dtype_bytes, ready, what, transit);
  if (!chunk.ok()) return chunk.status();
  if (!chunk->link->Enqueue(std::move(chunk->frame), options.abort)) return options.abort->status();
  return chunk->booking;
}

absl::Status CheckFrameSize(const Frame& frame, int chip, int peer, uint64_t elements, int dtype_bytes,
                            bool values) {
  const bool fits = values ? frame.elements() == elements
                           : frame.elements() == 0 && frame.header.emu_bytes == elements * dtype_bytes;
  if (fits) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("chip ", chip, " expected ", elements, values ? "" : " shape-only",
                                          " elements from chip ", peer, ", got a frame of ", frame.elements(),
                                          " elements and ", frame.header.emu_bytes, " emulated bytes"));
}

// Runs the chip's program in whichever thread can carry it on: the chip's
// own, or the one that brings a frame the chip waits for (Mailbox::Put's
// `may_run`: a frame from another worker, in the thread that also writes the
// next hops). Handed over through the mailbox (MailboxHook), so exactly one
// thread runs the program at a time; the chip's thread waits while it runs
// elsewhere and takes it back for whatever may block (a full link, a frame
// not yet usable, an abort).
class ChipCollective::Impl : public MailboxHook {
 public:
  Impl(const CollectivePlan& plan, int chip, HostNetwork& net, const RunOptions& options)
      : plan_(plan), chip_(chip), net_(net), options_(options), ready_(0.0),
        dtype_(plan.spec().dtype_bytes), profile_(net.topology().profile()) {
    // The trace names a transfer that goes the other way round because of a down link.
    for (const AxisPlan& a : plan.axes()) routed_[static_cast<int>(a.axis)] = a.way != 0;
  }

  void Prepare() {
    prog_ = BuildChipProgram(plan_, chip_, plan_.spec().chunk_bytes / sizeof(float));
    // Uninitialised on purpose: pages a chip never touches cost no memory.
    buffer_.reset(new float[plan_.virtual_len()]);
    // Fault in the pages that receives will write, outside the timed part,
    // then write the input (which may share those pages).
    for (const ChunkOp& op : prog_.recvs) {
      for (const Range& r : op.ranges) std::memset(buffer_.get() + r.offset, 0, r.len * sizeof(float));
    }
    FillCollectiveInput(plan_, chip_, buffer_.get());
    // Sends become ready when the last receive they depend on is done.
    for (const ChunkOp& op : prog_.sends) sends_after_[op.after_recv].push_back(&op);
    result_ = SortedResult();
  }

  void PrepareOn(std::shared_ptr<float[]> buffer, double start_s, LinkClocks* links) {
    prog_ = BuildChipProgram(plan_, chip_, plan_.spec().chunk_bytes / sizeof(float));
    buffer_ = std::move(buffer);
    ready_.Assign(0, plan_.virtual_len(), start_s);
    start_ = start_s;
    vector_unit_.Book(0, start_s);
    links_ = links;
    for (const ChunkOp& op : prog_.sends) sends_after_[op.after_recv].push_back(&op);
    result_ = SortedResult();
  }

  std::vector<Range> SortedResult() const {
    std::vector<Range> r = plan_.ResultRanges(chip_);
    std::sort(r.begin(), r.end(), [](const Range& a, const Range& b) { return a.offset < b.offset; });
    return r;
  }

  absl::Status Move(int start_rounds) {
    if (auto s = DrawStartLine(start_rounds); !s.ok()) return s;
    started_at_ = WallClock::now();
    absl::Status status = MoveAll();
    transit_.Clear();  // queued frames keep what they lent
    // Timed from the start line to the program's last step, in whichever
    // thread each happened: not until the chip's thread, woken for it, next
    // gets a core.
    wall_s_ = std::chrono::duration<double>((status.ok() ? finished_at_ : WallClock::now()) - started_at_).count();
    return status;
  }

  uint64_t CountMismatches() { return CountCollectiveMismatches(plan_, chip_, buffer_.get()); }

  absl::StatusOr<ChipRunResult> Report() {
    ChipRunResult result;
    result.chip = chip_;
    result.wall_s = wall_s_;
    for (const Range& r : plan_.ResultRanges(chip_)) {
      result.emulated_s = std::max(result.emulated_s, ready_.Max(r.offset, r.end()));
    }
    const double scale = net_.time_scale();
    if (scale > 0) result.host_lag_s = std::max(0.0, wall_s_ - result.emulated_s * scale);
    for (auto& [key, link] : *links_) {
      const auto& [axis, dir] = key;
      if (link.bytes_sent() == 0) continue;
      const Axis a = static_cast<Axis>(axis);
      result.links.push_back({chip_, *net_.topology().Neighbor(chip_, a, dir), a, dir,
                              static_cast<uint64_t>(link.bytes_sent())});
      if (auto s = net_.Link(chip_, a, dir)->JobStatus(options_.job); !s.ok()) return s;
    }
    return result;
  }

 private:
  // Where the program goes on after Advance returns.
  enum class Next {
    kDone,
    kHooked,    // waits for a frame, hooked in the mailbox: another thread may run it now
    kNeedChip,  // must wait for something (a full link): the chip's thread's to run
  };
  // Who runs the program (under run_mu_).
  enum class Runner { kChip, kHooked, kElsewhere, kDone };

  // The start line's peers: one frame per peer and round, over the first
  // link the program uses to it (two links to one peer, as on a ring of two,
  // would give its mailbox two frames under one key).
  absl::Status DrawStartLine(int rounds) {
    rounds_ = rounds;
    round_ = 0;
    line_sent_ = line_heard_ = 0;
    line_to_.clear();
    line_from_.clear();
    if (rounds == 0) return absl::OkStatus();
    if (options_.tag_base & kStartBarrierTagBit) {
      return absl::InternalError(absl::StrCat("chip ", chip_, ": a start line under tag base ", options_.tag_base,
                                              " would share tags with the data"));
    }
    std::set<int> to, from;
    for (const ChunkOp& op : prog_.sends) {
      if (!to.insert(op.peer).second) continue;
      auto link = OutgoingLink(net_, chip_, op.axis, op.dir, op.peer);
      if (!link.ok()) return link.status();
      line_to_.push_back({op.peer, *link});
    }
    for (const ChunkOp& op : prog_.recvs) from.insert(op.peer);
    line_from_.assign(from.begin(), from.end());
    return absl::OkStatus();
  }

  bool AtStartLine() const { return round_ < rounds_; }
  uint64_t LineTag() const { return kStartBarrierTagBit | options_.tag_base | static_cast<uint64_t>(round_); }

  // The frame the program waits for next: (source chip, tag).
  std::pair<int, uint64_t> NextReceive() const {
    if (AtStartLine()) return {line_from_[line_heard_], LineTag()};
    const ChunkOp& op = prog_.recvs[recv_ + 1];
    return {op.peer, op.tag | options_.tag_base};
  }

  // The frame NextReceive names has come.
  absl::Status Received(Frame frame) {
    if (AtStartLine()) {
      ++line_heard_;
      return absl::OkStatus();
    }
    return Use(prog_.recvs[recv_ + 1], std::move(frame));
  }

  // Puts a frame on its link: in the chip's thread waiting while the link is
  // full (an error once the job is aborted), elsewhere false when it is full.
  absl::StatusOr<bool> Onto(LinkSender& link, Frame& frame, bool in_chip) {
    if (!in_chip) return link.TryEnqueue(frame, options_.abort);
    if (!link.Enqueue(std::move(frame), options_.abort)) return options_.abort->status();
    return true;
  }

  absl::Status MoveAll() {
    while (true) {
      auto next = Advance(/*in_chip=*/true);
      if (!next.ok()) return next.status();
      if (*next == Next::kDone) return absl::OkStatus();
      // Hooked: wait while another thread carries the program on. A receive
      // fails, as Take would, once its hook has waited recv_timeout.
      const auto timeout = absl::ToChronoNanoseconds(options_.recv_timeout);
      std::unique_lock<std::mutex> lock(run_mu_);
      while (runner_ == Runner::kHooked || runner_ == Runner::kElsewhere) {
        const bool hooked = runner_ == Runner::kHooked;
        // Running elsewhere may hook again without a word (a wake-up per frame
        // is what this saves): look again after a timeout at the latest.
        const auto deadline = (hooked ? hooked_at_ : WallClock::now()) + timeout;
        if (!hooked || WallClock::now() < deadline) {
          run_cv_.wait_until(lock, deadline);
          continue;
        }
        const auto [peer, tag] = NextReceive();
        if (net_.mailbox().Unhook(options_.job, chip_, peer, tag)) {
          return absl::DeadlineExceededError(absl::StrCat("chip ", chip_, " waited ",
                                                          absl::FormatDuration(options_.recv_timeout),
                                                          " for data from chip ", peer, " (",
                                                          RunName(options_.job), ")"));
        }
        run_cv_.wait_for(lock, std::chrono::milliseconds(1));  // its frame came just now: the hook is being called
      }
      if (runner_ == Runner::kDone) return run_status_;
    }
  }

  // Runs the program on from where it is: first the start line's rounds
  // (each: a frame to every peer it sends to, then one from every peer it
  // receives from), then the sends that wait for receive recv_ (all of them
  // from send_ on), receive recv_ + 1, and so on. In the chip's thread a full
  // link is waited for; elsewhere it hands the program back (kNeedChip).
  // Once it returns kHooked another thread may run the program: the caller
  // touches none of it.
  absl::StatusOr<Next> Advance(bool in_chip) {
    while (true) {
      if (AtStartLine()) {
        for (; line_sent_ < line_to_.size(); ++line_sent_) {
          const auto [peer, link] = line_to_[line_sent_];
          Frame frame;
          frame.header = {options_.job, chip_, peer, LineTag(), 0, 0, 0, 0};
          auto on = Onto(*link, frame, in_chip);
          if (!on.ok()) return on.status();
          if (!*on) return Next::kNeedChip;
        }
        if (line_heard_ == line_from_.size()) {
          ++round_;
          line_sent_ = line_heard_ = 0;
          if (!AtStartLine()) started_at_ = WallClock::now();
          continue;
        }
      } else {
        auto sends = sends_after_.find(recv_);
        const size_t count = sends == sends_after_.end() ? 0 : sends->second.size();
        for (; send_ < count; ++send_) {
          if (!pending_) {
            auto booked = Book(*sends->second[send_]);
            if (!booked.ok()) return booked.status();
            pending_ = *std::move(booked);
          }
          auto on = Onto(*pending_->link, pending_->frame, in_chip);
          if (!on.ok()) return on.status();
          if (!*on) return Next::kNeedChip;
          pending_.reset();
        }
        CopyKeptParts();
        if (recv_ + 1 == static_cast<int>(prog_.recvs.size())) {
          finished_at_ = WallClock::now();
          return Next::kDone;
        }
      }
      const auto [peer, tag] = NextReceive();
      absl::StatusOr<Frame> frame;
      if (take_now_) {  // woken: the frame, or why not, is the chip's to wait for
        take_now_ = false;
        frame = net_.mailbox().Take(options_.job, chip_, peer, tag, options_.recv_timeout);
      } else {
        SetRunner(Runner::kHooked);
        auto got = net_.mailbox().TakeOrHook(options_.job, chip_, peer, tag, this);
        if (got.ok() && !got->has_value()) return Next::kHooked;
        SetRunner(in_chip ? Runner::kChip : Runner::kElsewhere);
        frame = got.ok() ? absl::StatusOr<Frame>(**std::move(got)) : got.status();
      }
      if (!frame.ok()) return frame.status();
      if (auto s = Received(*std::move(frame)); !s.ok()) return s;
    }
  }

  // The frame the chip waits for came in a thread that may run the program.
  void Arrived(Frame frame) override {
    SetRunner(Runner::kElsewhere);
    // The thread is not the chip's: whatever goes wrong, the chip must hear
    // of it, with a status made beforehand (making one may throw too).
    absl::StatusOr<Next> next = out_of_memory_;
    try {
      const absl::Status used = Received(std::move(frame));
      next = used.ok() ? Advance(/*in_chip=*/false) : absl::StatusOr<Next>(used);
    } catch (const std::bad_alloc&) {
      next = out_of_memory_;
    } catch (...) {
      next = failed_elsewhere_;
    }
    if (next.ok() && *next == Next::kHooked) return;
    std::lock_guard<std::mutex> lock(run_mu_);
    if (!next.ok() || *next == Next::kDone) {
      runner_ = Runner::kDone;
      run_status_ = next.status();
    } else {
      runner_ = Runner::kChip;
    }
    run_cv_.notify_all();  // under the lock: once it is released the chip's thread may end the run
  }

  void Wake() override {
    std::lock_guard<std::mutex> lock(run_mu_);
    runner_ = Runner::kChip;
    take_now_ = true;
    run_cv_.notify_all();
  }

  void SetRunner(Runner runner) {
    std::lock_guard<std::mutex> lock(run_mu_);
    runner_ = runner;
    if (runner == Runner::kHooked) hooked_at_ = WallClock::now();
  }

  // When all of op's data is ready (a reduction needs all of its own).
  double ReadyTime(const ChunkOp& op) const {
    double t = Earliest(op);
    for (const Range& r : op.ranges) t = std::max(t, ready_.Max(r.offset, r.end()));
    return t;
  }

  // How long op's chunk holds its link on the emulated clock.
  double OnLinkSeconds(const ChunkOp& op) const {
    return static_cast<double>(op.elements) * dtype_ / net_.topology().Link(op.axis).bw_dir;
  }

  double Earliest(const ChunkOp& op) const {
    return op.barrier_recv >= 0 ? done_upto_[op.barrier_recv] : start_ + profile_.collective_startup;
  }

  // When a send of op can start and stream out at its link's rate without
  // overtaking its data: the element at position e of the op goes on the
  // link at start + e / n of the send's time there, and must be ready by then.
  // Data that is still arriving is forwarded as it comes (cut-through, as an
  // ICI router does), one hop latency behind.
  double StreamReadyTime(const ChunkOp& op) const {
    double t = Earliest(op);
    const double n = static_cast<double>(op.elements);
    const double on_link = OnLinkSeconds(op);
    uint64_t before = 0;  // elements of op ahead of this range
    for (const Range& r : op.ranges) {
      ready_.ForEach(r.offset, r.end(), [&](uint64_t from, uint64_t, double value) {
        t = std::max(t, value - on_link * static_cast<double>(before + from - r.offset) / n);
      });
      before += r.len;
    }
    return t;
  }

  absl::StatusOr<BookedChunk> Book(const ChunkOp& op) {
    return BookChunk(net_, *links_, options_, chip_, op.peer, op.axis, op.dir, op.tag | options_.tag_base, buffer_,
                     op.ranges, dtype_, StreamReadyTime(op),
                     absl::StrCat("to chip ", op.peer, routed_[static_cast<int>(op.axis)] ? kRouted : ""), &transit_);
  }

  // Receives op's frame: its data into the buffer (or held for the next
  // link), its arrival on the emulated clock. The program moves on past it.
  absl::Status Use(const ChunkOp& op, Frame frame) {
    if (auto s = CheckFrameSize(frame, chip_, op.peer, op.elements, dtype_, buffer_ != nullptr); !s.ok()) return s;
    double done = frame.header.emu_arrival;
    if (op.reduce) {
      // The add runs on the chip's vector units, one op at a time: it starts
      // when the data and the chip's own partial sums are ready, at the
      // unit's first idle moment from then on.
      const double n = static_cast<double>(op.elements);
      const double add = RooflineSeconds(profile_, n, 3 * n * dtype_) *
                         (options_.faults != nullptr ? options_.faults->ComputeFactor(chip_, options_.step) : 1);
      done = vector_unit_.Book(std::max(done, ReadyTime(op)), add) + add;
      if (buffer_ != nullptr) Accumulate(frame, op.ranges);
      for (const Range& r : op.ranges) ready_.Assign(r.offset, r.end(), done);
    } else {
      ArrivedAsStreamed(op, done);
      if (buffer_ != nullptr) Place(std::move(frame), op.ranges);
    }
    done_upto_.push_back(std::max(done, done_upto_.empty() ? 0.0 : done_upto_.back()));
    ++recv_;
    send_ = 0;
    return absl::OkStatus();
  }

  // A copied frame's data arrives in order over its time on the link: each
  // of kCutThroughSlices slices is usable when its last byte has arrived, so
  // a chip can forward the start of a chunk before its end is in.
  void ArrivedAsStreamed(const ChunkOp& op, double arrival) {
    const double n = static_cast<double>(op.elements);
    const double on_link = OnLinkSeconds(op);
    const uint64_t slice = std::max<uint64_t>(1, (op.elements + kCutThroughSlices - 1) / kCutThroughSlices);
    uint64_t pos = 0;  // elements of op before the current piece
    for (const Range& r : op.ranges) {
      for (uint64_t at = r.offset; at < r.end();) {
        const uint64_t slice_end = (pos / slice + 1) * slice;  // in op positions
        const uint64_t len = std::min(r.end() - at, slice_end - pos);
        pos += len;
        ready_.Assign(at, at + len, arrival - on_link * (n - static_cast<double>(pos)) / n);
        at += len;
      }
    }
  }

  // Adds the frame's elements into `ranges` of the buffer. Received bytes
  // that are split across transport slices or not float-aligned (most of
  // them over gRPC) go through a small block that stays in L1, rather than a
  // chunk-sized copy.
  void Accumulate(const Frame& frame, const std::vector<Range>& ranges) {
    const float* in = frame.contiguous();
    uint64_t first = 0;
    for (const Range& r : ranges) {
      float* dst = buffer_.get() + r.offset;
      for (uint64_t done = 0; done < r.len;) {
        const uint64_t len = in != nullptr ? r.len : std::min<uint64_t>(kAddBlock, r.len - done);
        const float* src = in != nullptr ? in + first : add_block_;
        if (in == nullptr) frame.CopyOut(first, len, add_block_);
        for (uint64_t i = 0; i < len; ++i) dst[done + i] += src[i];
        done += len;
        first += len;
      }
    }
  }

  // Holds the frame where it arrived, to be lent to the next link: the sends
  // waiting for it go out before the chip copies anything (cut-through, as an
  // ICI router forwards before the write to HBM lands), so a copy never delays
  // the next hop, and on a busy host the chips' copies do not queue up in
  // front of each other's forwards. What the chip keeps is copied into its
  // buffer by CopyKeptParts once those sends are queued; what it only passes
  // on (outside its result) is never copied. With bf16 on the wire the copy
  // is made at once: SendChunk rounds from the buffer.
  void Place(Frame frame, const std::vector<Range>& ranges) {
    const auto held = std::make_shared<const Frame>(std::move(frame));
    uint64_t first = 0;
    for (const Range& r : ranges) {
      ForEachPart(r, [&](Range part, bool kept) {
        const uint64_t at = first + (part.offset - r.offset);
        if (options_.wire_bf16) {
          held->CopyOut(at, part.len, buffer_.get() + part.offset);
          transit_.Release(part);
          return;
        }
        transit_.Hold(part, held, at);
        if (kept) to_copy_.push_back({part, held, at});
      });
      first += r.len;
    }
  }

  void CopyKeptParts() {
    for (const KeptPart& k : to_copy_) {
      k.frame->CopyOut(k.first, k.part.len, buffer_.get() + k.part.offset);
      transit_.Release(k.part);
    }
    to_copy_.clear();
  }

  // Calls fn on the parts of r inside (true) and outside (false) the result.
  template <typename Fn>
  void ForEachPart(Range r, Fn&& fn) const {
    uint64_t pos = r.offset;
    for (const Range& res : result_) {
      const uint64_t from = std::max(pos, res.offset), to = std::min(r.end(), res.end());
      if (from >= to) continue;
      if (from > pos) fn(Range{pos, from - pos}, false);
      fn(Range{from, to - from}, true);
      pos = to;
    }
    if (pos < r.end()) fn(Range{pos, r.end() - pos}, false);
  }

  const CollectivePlan& plan_;
  static constexpr char kRouted[] = " (routed round a down link)";
  bool routed_[kNumAxes] = {};  // axes the plan runs one way round a down link
  const int chip_;
  HostNetwork& net_;
  const RunOptions options_;
  IntervalMax<double> ready_;
  const int dtype_;
  const ChipProfile& profile_;
  BusyTimeline vector_unit_;  // the chip's adds on the emulated clock
  double start_ = 0;          // emulated time the collective was called
  std::vector<double> done_upto_;  // latest completion among receives 0..i
  // Shared with frames that lend ranges of it to their receivers.
  std::shared_ptr<float[]> buffer_;
  static constexpr uint64_t kAddBlock = 2048;  // 8 KiB
  float add_block_[kAddBlock];
  std::vector<Range> result_;  // sorted by offset
  TransitBytes transit_;
  struct KeptPart {
    Range part;                          // in the buffer
    std::shared_ptr<const Frame> frame;  // where it arrived,
    uint64_t first;                      // from this element on
  };
  std::vector<KeptPart> to_copy_;  // received, held, not yet in the buffer
  LinkClocks own_links_;
  LinkClocks* links_ = &own_links_;
  ChipProgram prog_;
  std::map<int, std::vector<const ChunkOp*>> sends_after_;
  // Where the program is: the sends after receive recv_ (-1: those that
  // wait for none), from send_ on; pending_ was booked when its link was full.
  int recv_ = -1;
  size_t send_ = 0;
  std::optional<BookedChunk> pending_;
  bool take_now_ = false;  // woken: the next receive waits in the chip's thread
  std::mutex run_mu_;
  std::condition_variable run_cv_;
  Runner runner_ = Runner::kChip;
  WallClock::time_point hooked_at_;  // when the program last waited for a frame
  absl::Status run_status_;
  const absl::Status out_of_memory_ =
      absl::ResourceExhaustedError(absl::StrCat("chip ", chip_, " ran out of host memory"));
  const absl::Status failed_elsewhere_ =
      absl::InternalError(absl::StrCat("chip ", chip_, "'s program failed in the thread that received its data"));
  // The start line: its rounds, the one the chip is in, the peers it sends
  // to (over the first link to each) and hears from, and how many of each
  // this round.
  int rounds_ = 0;
  int round_ = 0;
  std::vector<std::pair<int, LinkSender*>> line_to_;
  std::vector<int> line_from_;
  size_t line_sent_ = 0, line_heard_ = 0;
  WallClock::time_point started_at_;   // when the chip left the start line
  WallClock::time_point finished_at_;  // when the program's last step was done
  double wall_s_ = 0;
};

ChipCollective::ChipCollective(const CollectivePlan& plan, int chip, HostNetwork& net, const RunOptions& options)
    : impl_(std::make_unique<Impl>(plan, chip, net, options)) {}
ChipCollective::~ChipCollective() = default;
void ChipCollective::Prepare() { impl_->Prepare(); }
void ChipCollective::PrepareOn(std::shared_ptr<float[]> buffer, double start_s, LinkClocks* links) {
  impl_->PrepareOn(std::move(buffer), start_s, links);
}
absl::Status ChipCollective::Move(int start_rounds) { return impl_->Move(start_rounds); }
absl::StatusOr<ChipRunResult> ChipCollective::Report() { return impl_->Report(); }
uint64_t ChipCollective::CountMismatches() { return impl_->CountMismatches(); }

}  // namespace tpuemu
