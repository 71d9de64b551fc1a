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

}  // namespace
}  // namespace tpuemu
