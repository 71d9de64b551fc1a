#include "services/frame_codec.h"

#include <memory>

#include "gtest/gtest.h"

namespace tpuemu {
namespace {

Frame Header(Frame f) {
  f.header = {7, 1, 2, 0x1234, 1.5e-6, 4096, 11, 22};
  return f;
}

void ExpectSame(const Frame& got, const std::vector<float>& want) {
  EXPECT_EQ(got.header.job, 7u);
  EXPECT_EQ(got.header.src_chip, 1);
  EXPECT_EQ(got.header.dst_chip, 2);
  EXPECT_EQ(got.header.tag, 0x1234u);
  EXPECT_EQ(got.header.emu_arrival, 1.5e-6);
  EXPECT_EQ(got.header.due_at_ns, 22);
  ASSERT_EQ(got.elements(), want.size());
  std::vector<float> out(want.size());
  got.CopyOut(0, want.size(), out.data());
  EXPECT_EQ(out, want);
  if (want.size() > 3) {
    float two[2];
    got.CopyOut(want.size() - 3, 2, two);
    EXPECT_EQ(two[0], want[want.size() - 3]);
    EXPECT_EQ(two[1], want[want.size() - 2]);
  }
}

TEST(FrameCodecTest, OwnedPayloadRoundTrips) {
  Frame f;
  for (int i = 0; i < 1000; ++i) f.payload.push_back(i * 0.5f);
  std::vector<float> want(f.payload.begin(), f.payload.end());
  auto got = DecodeFrame(EncodeFrame(Header(std::move(f))));
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectSame(*got, want);
}

TEST(FrameCodecTest, LentSegmentsRoundTripAndKeepTheirBufferAlive) {
  auto buffer = std::shared_ptr<float[]>(new float[100]);
  for (int i = 0; i < 100; ++i) buffer[i] = static_cast<float>(i);
  Frame f;
  auto bytes = [&](int first) { return reinterpret_cast<const std::byte*>(buffer.get() + first); };
  f.lent = {{bytes(10), 5 * sizeof(float), buffer}, {bytes(50), 7 * sizeof(float), buffer}};
  grpc::ByteBuffer wire = EncodeFrame(Header(std::move(f)));
  std::weak_ptr<float[]> weak = buffer;
  buffer.reset();
  EXPECT_FALSE(weak.expired()) << "the encoded message must keep the lender's buffer alive";
  {
    auto got = DecodeFrame(wire);  // reads the lent ranges in place
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectSame(*got, {10, 11, 12, 13, 14, 50, 51, 52, 53, 54, 55, 56});
    wire.Clear();
    EXPECT_FALSE(weak.expired()) << "the decoded frame still reads from it";
  }
  EXPECT_TRUE(weak.expired());
}

TEST(FrameCodecTest, GarbageIsRefused) {
  grpc::Slice junk("\x0a\xff\xff\xff", 4);
  EXPECT_FALSE(DecodeFrame(grpc::ByteBuffer(&junk, 1)).ok());
  grpc::Slice empty("", 0);
  EXPECT_FALSE(DecodeFrame(grpc::ByteBuffer(&empty, 1)).ok());
}

grpc::ByteBuffer Wire(const std::string& bytes) {
  grpc::Slice slice(bytes.data(), bytes.size());
  return grpc::ByteBuffer(&slice, 1);
}

std::string EncodedHeader() {
  Frame f;
  f.payload.assign(4, 1.0f);
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(EncodeFrame(Header(std::move(f))).Dump(&slices).ok());
  const std::string prefix(reinterpret_cast<const char*>(slices[0].begin()), slices[0].size());
  return prefix.substr(0, prefix.size() - 2);  // without the payload's tag and length (16: one byte)
}

TEST(FrameCodecTest, AHeaderDeclaringATerabyteIsRefusedBeforeAnythingIsAllocated) {
  // Field 1, length 2^40, and seven bytes: the declared length is checked
  // against what the message holds (a 1 TiB allocation used to be tried).
  auto got = DecodeFrame(Wire(std::string("\x0a\x80\x80\x80\x80\x80\x20", 7) + "garbage"));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(got.status().message().find("field 1 declares 1099511627776 bytes but the message has 7 left"),
            std::string::npos)
      << got.status();
}

TEST(FrameCodecTest, AHeaderLongerThanAnyHeaderIsRefused) {
  std::string wire = "\x0a\x90\x4e";  // field 1, 10000 bytes
  wire += std::string(10000, '\0');
  auto got = DecodeFrame(Wire(wire));
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("header declares 10000 bytes; at most 256"), std::string::npos)
      << got.status();
}

TEST(FrameCodecTest, APayloadLongerThanTheMessageIsRefused) {
  const std::string wire = EncodedHeader() + "\x12\x80\x80\x04" + std::string(64, '\0');  // declares 64 KiB
  auto got = DecodeFrame(Wire(wire));
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("field 2 declares 65536 bytes but the message has 64 left"),
            std::string::npos)
      << got.status();
  // The same header with an honest payload decodes.
  auto honest = DecodeFrame(Wire(EncodedHeader() + "\x12\x40" + std::string(64, '\0')));
  ASSERT_TRUE(honest.ok()) << honest.status();
  EXPECT_EQ(honest->elements(), 16u);
}

}  // namespace
}  // namespace tpuemu
