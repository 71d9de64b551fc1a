#include "core/wire/frame.h"

#include <malloc.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace tpuemu {

void PrepareProcessForDataPath() {
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  // One arena: with one per thread, gRPC's receive buffers and our chunks
  // land in arenas that are trimmed and re-faulted over and over (measured:
  // all-gather over gRPC ~35% faster with a single arena).
  mallopt(M_ARENA_MAX, 1);
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

void WarmHeap(size_t bytes) {
  // Below the mmap threshold set above, so the blocks come from the heap and
  // stay there, faulted in, when freed (the trim threshold is higher still).
  // In blocks of a receive slice's size, as the transport will ask: malloc
  // fits each request in the smallest free chunk that holds it. Once an idle
  // worker has given its free pages back (malloc_trim) those chunks are
  // scattered and cold, and the transport's requests, interleaved with
  // frees, do not land on exactly the chunks a warm-up took: three times the
  // bytes covers most of them. (A paced 32 MiB all-gather on a pod idle for
  // 5 s, wall over emulated time: 1.56-2.24 with one block of the bytes
  // warmed, 1.03-1.37 with 1 MiB blocks, 1.02-1.28 with the bytes in
  // slices, 1.00-1.17 with three times the bytes; 1.00-1.02 in a worker
  // that never gives its heap back.)
  constexpr size_t kBlock = (64 << 10) + 40;  // gRPC 1.51's read slices: 64 KiB and a header
  constexpr size_t kCoverage = 3;
  bytes = std::min<size_t>(bytes * kCoverage, 192 << 20);
  std::vector<char*> blocks;
  for (size_t done = 0; done < bytes; done += kBlock) {
    auto* p = static_cast<char*>(std::malloc(kBlock));
    if (p == nullptr) break;
    for (size_t i = 0; i < kBlock; i += 4096) p[i] = 0;
    p[kBlock - 1] = 0;
    asm volatile("" : : "r"(p) : "memory");  // the writes must happen
    blocks.push_back(p);
  }
  for (char* p : blocks) std::free(p);
}

namespace {

// Calls fn(data, bytes, keep) on the contiguous pieces holding bytes
// [offset, offset + n) of a frame; keep is the piece's own owner, or null
// when the frame itself owns it.
template <typename Fn>
void ForEachPiece(const Frame& f, size_t offset, size_t n, Fn&& fn) {
  if (!f.lent.empty()) {
    for (const Segment& s : f.lent) {
      if (n == 0) break;
      if (offset >= s.bytes) {
        offset -= s.bytes;
        continue;
      }
      const size_t take = std::min(n, s.bytes - offset);
      fn(s.data + offset, take, &s.keep);
      n -= take;
      offset = 0;
    }
  } else if (f.received) {
    f.received->ForEachPiece(offset, n, [&](const std::byte* p, size_t len) { fn(p, len, nullptr); });
  } else if (n > 0) {
    fn(reinterpret_cast<const std::byte*>(f.payload.data()) + offset, n, nullptr);
  }
}

}  // namespace

size_t Frame::elements() const {
  if (!lent.empty()) {
    size_t bytes = 0;
    for (const Segment& s : lent) bytes += s.bytes;
    return bytes / sizeof(float);
  }
  if (received) return received->size() / sizeof(float);
  return payload.size();
}

const float* Frame::contiguous() const {
  if (lent.empty() && !received) return payload.data();
  const std::byte* p = nullptr;
  int pieces = 0;
  ForEachPiece(*this, 0, elements() * sizeof(float), [&](const std::byte* d, size_t, const void*) {
    p = d;
    ++pieces;
  });
  if (pieces != 1 || reinterpret_cast<uintptr_t>(p) % alignof(float) != 0) return nullptr;
  return reinterpret_cast<const float*>(p);
}

void Frame::CopyOut(size_t first, size_t n, float* dst) const {
  auto* out = reinterpret_cast<std::byte*>(dst);
  ForEachPiece(*this, first * sizeof(float), n * sizeof(float), [&](const std::byte* p, size_t len, const void*) {
    std::memcpy(out, p, len);
    out += len;
  });
}

void Frame::Lend(size_t first, size_t n, const std::shared_ptr<const Frame>& self, std::vector<Segment>* out) const {
  ForEachPiece(*this, first * sizeof(float), n * sizeof(float),
               [&](const std::byte* p, size_t len, const std::shared_ptr<const void>* keep) {
                 out->push_back({p, len, keep != nullptr ? *keep : self});
               });
}

}  // namespace tpuemu
