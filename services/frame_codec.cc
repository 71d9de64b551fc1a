#include "services/frame_codec.h"

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tpuemu/v1/peer.pb.h"

namespace tpuemu {
namespace {

constexpr uint8_t kHeaderTag = (1 << 3) | 2;   // field 1, length-delimited
constexpr uint8_t kPayloadTag = (2 << 3) | 2;  // field 2, length-delimited

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// Reads sequentially across the slices of a received message.
class SliceReader {
 public:
  explicit SliceReader(const std::vector<grpc::Slice>& slices) : slices_(slices) {}
  size_t slice() const { return slice_; }
  size_t pos() const { return pos_; }
  size_t consumed() const { return consumed_; }
  bool Skip(size_t n) {
    while (n > 0) {
      if (slice_ == slices_.size()) return false;
      const size_t take = std::min(n, slices_[slice_].size() - pos_);
      n -= take;
      pos_ += take;
      consumed_ += take;
      if (pos_ == slices_[slice_].size()) {
        ++slice_;
        pos_ = 0;
      }
    }
    return true;
  }

  bool Byte(uint8_t* b) { return Copy(b, 1); }

  bool Varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t b;
      if (!Byte(&b)) return false;
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  }

  bool Copy(void* dst, size_t n) {
    auto* out = static_cast<uint8_t*>(dst);
    while (n > 0) {
      if (slice_ == slices_.size()) return false;
      const grpc::Slice& s = slices_[slice_];
      const size_t take = std::min(n, s.size() - pos_);
      std::memcpy(out, s.begin() + pos_, take);
      out += take;
      n -= take;
      pos_ += take;
      consumed_ += take;
      if (pos_ == s.size()) {
        ++slice_;
        pos_ = 0;
      }
    }
    return true;
  }

 private:
  const std::vector<grpc::Slice>& slices_;
  size_t slice_ = 0;
  size_t pos_ = 0;
  size_t consumed_ = 0;
};

// The payload of a received message, read in place from gRPC's slices.
class SliceBytes : public TransportBytes {
 public:
  SliceBytes(std::vector<grpc::Slice> slices, size_t first_slice, size_t first_pos, size_t size)
      : slices_(std::move(slices)), first_slice_(first_slice), first_pos_(first_pos), size_(size) {}
  size_t size() const override { return size_; }

  void ForEachPiece(size_t offset, size_t n,
                    const std::function<void(const std::byte*, size_t)>& fn) const override {
    size_t s = first_slice_, pos = first_pos_ + offset;
    while (s < slices_.size() && pos >= slices_[s].size()) pos -= slices_[s++].size();
    while (n > 0 && s < slices_.size()) {
      const size_t take = std::min(n, slices_[s].size() - pos);
      fn(reinterpret_cast<const std::byte*>(slices_[s].begin()) + pos, take);
      n -= take;
      ++s;
      pos = 0;
    }
  }

 private:
  std::vector<grpc::Slice> slices_;
  size_t first_slice_, first_pos_, size_;
};

}  // namespace

grpc::ByteBuffer EncodeFrame(Frame&& frame) {
  v1::PeerChunkHeader h;
  h.set_job(frame.header.job);
  h.set_src_chip(frame.header.src_chip);
  h.set_dst_chip(frame.header.dst_chip);
  h.set_tag(frame.header.tag);
  h.set_emu_arrival(frame.header.emu_arrival);
  h.set_emu_bytes(frame.header.emu_bytes);
  h.set_sent_at_ns(frame.header.sent_at_ns);
  h.set_due_at_ns(frame.header.due_at_ns);
  const std::string header = h.SerializeAsString();
  const size_t payload_bytes = frame.elements() * sizeof(float);

  std::string prefix;
  prefix.push_back(static_cast<char>(kHeaderTag));
  PutVarint(header.size(), &prefix);
  prefix += header;
  prefix.push_back(static_cast<char>(kPayloadTag));
  PutVarint(payload_bytes, &prefix);

  std::vector<grpc::Slice> slices = {grpc::Slice(prefix.data(), prefix.size())};
  if (!frame.lent.empty()) {
    // gRPC keeps each segment's owner alive until it has sent the bytes.
    for (Segment& s : frame.lent) {
      auto* keep = new std::shared_ptr<const void>(std::move(s.keep));
      slices.emplace_back(const_cast<std::byte*>(s.data), s.bytes,
                          [](void* p) { delete static_cast<std::shared_ptr<const void>*>(p); }, keep);
    }
  } else if (payload_bytes > 0) {
    // gRPC owns the payload vector until it has sent it.
    auto* owned = new Payload(std::move(frame.payload));
    slices.emplace_back(owned->data(), payload_bytes, [](void* p) { delete static_cast<Payload*>(p); }, owned);
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

absl::StatusOr<Frame> DecodeFrame(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return absl::DataLossError("PeerChunk: unreadable buffer");
  SliceReader in(slices);
  size_t left = buffer.Length();  // bytes not yet read: no declared length may exceed it
  size_t payload_slice = 0, payload_pos = 0, payload_len = 0;
  bool have_payload = false;
  Frame frame;
  bool have_header = false;
  uint8_t tag;
  while (in.Byte(&tag)) {
    const size_t before = in.consumed();
    uint64_t len;
    if (!in.Varint(&len)) return absl::DataLossError("PeerChunk: truncated length");
    left -= 1 + (in.consumed() - before);
    // Lengths come from the sender: checked before anything is read or
    // allocated by them.
    if (len > left) {
      return absl::DataLossError(absl::StrCat("PeerChunk: field ", tag >> 3, " declares ", len,
                                              " bytes but the message has ", left, " left"));
    }
    if (tag == kHeaderTag) {
      if (len > kMaxHeaderBytes) {
        return absl::DataLossError(
            absl::StrCat("PeerChunk: header declares ", len, " bytes; at most ", kMaxHeaderBytes, " allowed"));
      }
      std::string bytes(len, '\0');
      v1::PeerChunkHeader h;
      if (!in.Copy(bytes.data(), len) || !h.ParseFromString(bytes)) {
        return absl::DataLossError("PeerChunk: bad header");
      }
      frame.header = {h.job(),       h.src_chip(),   h.dst_chip(),   h.tag(),      h.emu_arrival(),
                      h.emu_bytes(), h.sent_at_ns(), h.due_at_ns()};
      have_header = true;
    } else if (tag == kPayloadTag) {
      if (len % sizeof(float) != 0) return absl::DataLossError("PeerChunk: payload is not whole float32s");
      payload_slice = in.slice();
      payload_pos = in.pos();
      payload_len = len;
      have_payload = true;
      if (!in.Skip(len)) return absl::DataLossError("PeerChunk: truncated payload");
    } else {
      return absl::DataLossError(absl::StrCat("PeerChunk: unexpected field tag ", tag));
    }
    left -= len;
  }
  if (!have_header) return absl::DataLossError("PeerChunk: no header");
  if (have_payload) {
    // The slices are reference-counted: the frame keeps them, no copy.
    frame.received = std::make_unique<SliceBytes>(std::move(slices), payload_slice, payload_pos, payload_len);
  }
  return frame;
}

}  // namespace tpuemu
