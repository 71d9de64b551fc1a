// The CLI shows core's errors with its own flag names.
#include "services/flag_names.h"

#include "client/cli_errors.h"

#include "core/collective/plan.h"
#include "core/collective/spec.h"
#include "core/matmul/spec.h"
#include "core/pod/topology.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tpuemu {
namespace {

using ::testing::HasSubstr;

std::string AsCliShowsIt(const absl::Status& s) { return WithFlagNames(s.message()); }

TEST(FlagNamesTest, CoreFieldsReadAsTheCliFlagsThatSetThem) {
  EXPECT_EQ(AsCliShowsIt(Topology::Create({"v5e:4x4", 1, 3, "auto"}).status()),
            "--chips-per-host '3': must divide the 16 chips of slice 4x4");
  EXPECT_EQ(AsCliShowsIt(ParseAxes("x,w").status()),
            "--axes 'x,w': unknown axis 'w'; allowed: x, y, z, dcn (comma-separated)");
  EXPECT_EQ(AsCliShowsIt(ParseOp("all-sum").status()),
            "--op 'all-sum': unknown collective; allowed: all-gather, reduce-scatter, all-reduce, all-to-all");
}

TEST(FlagNamesTest, EveryMentionOfAFieldIsMapped) {
  auto topo = Topology::Create({"v5e:4x4", 1, 4, "auto"});
  ASSERT_TRUE(topo.ok()) << topo.status();
  MatmulSpec matmul;
  matmul.expr = "A[I, J] * B[J, K] -> C[I, K]";
  matmul.dims = "I=0";
  EXPECT_EQ(AsCliShowsIt(PlanMatmulSpec(matmul, *topo).status()),
            "--dims: 'I=0' is not NAME=SIZE with a positive integer size (example: --dims I=1024,J=512,K=2048)");
  CollectiveSpec spec;
  spec.op = CollectiveOp::kAllGather;
  spec.axes = {Axis::kDcn};
  spec.bytes = 1 << 20;
  const std::string shown = AsCliShowsIt(CollectivePlan::Create(*topo, spec).status());
  EXPECT_THAT(shown, HasSubstr("--axes 'dcn': the pod"));
  EXPECT_THAT(shown, HasSubstr("(start the pod with --slices 2 or more)"));
}

TEST(FlagNamesTest, TextThatNamesNoFieldIsLeftAsItIs) {
  EXPECT_EQ(WithFlagNames("bytes 12: `tpuemu reference` and `bytes_per_chip`"),
            "bytes 12: `tpuemu reference` and `bytes_per_chip`");
}

// A job file's bytes quoted in an error reach the terminal as text, never as
// an escape sequence; the message's own lines stay lines.
TEST(FlagNamesTest, AnErrorQuotingControlBytesIsSafeOnATerminal) {
  EXPECT_EQ(TerminalSafe("emb_dim: '\x1b]0;pwned\x07\x1b[31mRED' is not a whole number\nsecond line"),
            "emb_dim: '\\x1B]0;pwned\\x07\\x1B[31mRED' is not a whole number\nsecond line");
}

}  // namespace
}  // namespace tpuemu
