// The notation's parser and checks, and the planner's choices for the seed's
// cases (seed 000 part 3, seed 002): steps, bytes, flops. No data moves here;
// matmul_run_test.cc runs the plans.
#include "core/matmul/plan.h"

#include "core/matmul/spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tpuemu {
namespace {

using testing::HasSubstr;

Topology Pod(const std::string& shape, const std::string& wrap = "auto") {
  auto t = Topology::Create({shape, 1, 1, wrap});
  EXPECT_TRUE(t.ok()) << t.status();
  return *t;
}

absl::StatusOr<MatmulPlan> Plan(const std::string& expr, const std::string& dims, const Topology& topo,
                                const std::string& mesh = "") {
  MatmulSpec spec;
  spec.expr = expr;
  spec.dims = dims;
  spec.mesh = mesh;
  return PlanMatmulSpec(spec, topo);
}

std::vector<std::string> Notations(const MatmulCandidate& c) {
  std::vector<std::string> out;
  for (const MatmulStep& s : c.steps) out.push_back(s.notation);
  return out;
}

const MatmulCandidate* FindCandidate(const MatmulPlan& plan, const std::string& summary) {
  for (const MatmulCandidate& c : plan.candidates) {
    if (c.summary == summary) return &c;
  }
  return nullptr;
}

TEST(MatmulExprTest, ParsesShardingsAndUnreducedAxes) {
  auto e = ParseMatmulExpr("In[B_X, M_YZ] * Win[M_YZ, H] -> Out[B_X, H]{U_YZ}");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->a.name, "In");
  EXPECT_EQ(e->a.dims[1].name, "M");
  EXPECT_EQ(e->a.dims[1].axes, "YZ");
  EXPECT_EQ(e->b.name, "Win");
  EXPECT_EQ(e->out.unreduced, "YZ");
  EXPECT_TRUE(ParseMatmulExpr("A[I,J]*B[J,K]->C[I,K]{U_X, U_Y}").ok());
}

TEST(MatmulExprTest, SyntaxErrorsPointAtTheOffendingCharacter) {
  auto e = ParseMatmulExpr("A[I_X, J * B[J, K_Y] -> C[I_X, K_Y]");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(e.status().message());
  EXPECT_THAT(msg, HasSubstr("expected ',' or ']' after dimension 'J'"));
  // The caret sits under the '*' (column 9 of the expression).
  EXPECT_THAT(msg, HasSubstr("\n  A[I_X, J * B[J, K_Y] -> C[I_X, K_Y]\n           ^"));

  for (const char* bad : {"", "A", "A[]", "A[I_] * B[I, K] -> C[K]", "A[I] B[I] -> C[]", "A[I] * B[I, K] C[K]",
                          "A[I] * B[I, K] -> C[K] junk", "A[I] * B[I, K] -> C[K]{V_X}", "A[1] * B[1] -> C[]"}) {
    auto r = ParseMatmulExpr(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("^")) << bad;
  }
  // One name for two tensors ran, and --dims A.J then named no dimension.
  for (const char* twice : {"A[I, J] * A[J, K] -> C[I, K]", "A[I, J] * B[J, K] -> A[I, K]"}) {
    auto r = ParseMatmulExpr(twice);
    ASSERT_FALSE(r.ok()) << twice;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("'A' names two tensors")) << twice;
  }
}

TEST(MatmulBindTest, BadExpressionsGetClearErrors) {
  const Topology topo = Pod("v5p:2x4");
  struct Case {
    const char* expr;
    const char* dims;
    const char* says;
  };
  const Case cases[] = {
      {"A[I_X, J_X] * B[J, K] -> C[I, K]", "I=8,J=8,K=8", "forbidden sharding: axis X is used twice in A"},
      {"A[I_XX, J] * B[J, K] -> C[I, K]", "I=8,J=8,K=8", "axis X is used twice"},
      {"A[I_W, J] * B[J, K] -> C[I, K]", "I=8,J=8,K=8", "axis W is not in the mesh (X=x(2), Y=y(4))"},
      {"A[I_X, J] * B[J, K] -> C[I, K]", "I=3,J=8,K=8", "size 3, which does not split evenly over X (2 shards)"},
      {"A[I, J] * B[J, K] -> C[I, K]", "I=8,A.J=8,B.J=16,K=8", "contracting dimension J has size 8 in A but 16 in B"},
      {"A[I, J] * B[J, K] -> C[I, L]", "I=8,J=8,K=8,L=8", "output dimension L is in neither A nor B"},
      {"A[I, J] * B[J, K] -> C[I]", "I=8,J=8,K=8", "dimension K of B is not contracted"},
      {"A[I, J] * B[K, L] -> C[I, J, K, L]", "I=8,J=8,K=8,L=8", "share no dimension"},
      {"A[I, J] * B[J, K] -> C[I, J, K]", "I=8,J=8,K=8", "batch dimension"},
      {"A[I, J] * B[J, K] -> C[I, K]", "I=8,J=8", "no size for dimension K"},
      {"A[I, J] * B[J, K] -> C[I, K]", "I=8,J=8,K=8,Q=2", "`dims`: Q names no dimension"},
      {"A[I, J] * B[J, K] -> C[I, K]", "I=8,J=0,K=8", "positive integer"},
      {"A[I, J] * B[J, K] -> C[I, K]", "I=8,,J=8,K=8", "`dims` 'I=8,,J=8,K=8': entry 2 is empty"},
      {"A[I, J] * B[J, K] -> C[I, K]", "I=8,J=8,K=8,", "entry 4 is empty"},
      {"A[I, J] * B[J, K] -> C[I, K]{U_X}", "I=8,J=8,K=8", "no contracted dimension is sharded on X"},
      {"A[I, J, L] * B[L, J, K] -> C[I, K]", "I=8,J=8,K=8,L=8", "same order"},
      {"A[J, I, L] * B[J, L, K] -> C[I, K]", "I=8,J=8,K=8,L=8", "interleaves"},
      {"A[I, J] * B[J, K] -> C[K, Q, I]", "I=8,J=8,K=8", "output dimension Q"},
      {"A[I, J] * B[J, K] -> C[I, K]", "I=4194304,J=4194304,K=4194304", "exceeds 2^60"},
      {"A[I_X, J] * B[J, K_Y] -> C[I_X, K_Y]", "I=65536,J=65536,K=65536", "MiB of host memory (limit 12288 MiB)"},
      {"A[I_XY, J] * B[J, K] -> C[I, K]", "I=8,J=1,K=1", "cannot split evenly over its 8 chips"},
  };
  for (const Case& c : cases) {
    auto plan = Plan(c.expr, c.dims, topo);
    ASSERT_FALSE(plan.ok()) << c.expr;
    EXPECT_THAT(std::string(plan.status().message()), HasSubstr(c.says)) << c.expr << "\n" << plan.status();
  }
  auto mesh = Plan("A[I_X, J] * B[J, K] -> C[I_X, K]", "I=8,J=8,K=8", topo, "X=z");
  ASSERT_FALSE(mesh.ok());
  EXPECT_THAT(std::string(mesh.status().message()), HasSubstr("`mesh`"));
  auto empty = Plan("A[I_X, J] * B[J, K] -> C[I_X, K]", "I=8,J=8,K=8", topo, "X=x,,Y=y");
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(std::string(empty.status().message()), HasSubstr("`mesh` 'X=x,,Y=y': entry 2 is empty"));
  // Spaces after the commas are fine.
  EXPECT_TRUE(Plan("A[I_X, J] * B[J, K_Y] -> C[I_X, K_Y]", "I=8, J=8, K=8", topo, "X=x, Y=y").ok());
}

TEST(MatmulPlanTest, Case1NeedsNoCommunication) {
  const Topology topo = Pod("v5p:2x4");
  auto plan = Plan("A[I_X, J] * B[J, K_Y] -> C[I_X, K_Y]", "I=256,J=128,K=512", topo);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Notations(plan->chosen()), std::vector<std::string>{"A[I_X, J] * B[J, K_Y] -> C[I_X, K_Y]"});
  EXPECT_EQ(plan->chosen().comm_bytes_per_chip, 0u);
  EXPECT_EQ(plan->chosen().flops_per_chip, 2ull * 256 * 128 * 512 / 8);  // no duplicated work
}

TEST(MatmulPlanTest, Case2GathersTheShardedContractingDimensionOrReducesAfterwards) {
  // Seed 000, question 9: A[I, J_X] * B[J, K] -> C[I, K]: AllGather A first,
  // or slice B, multiply to C{U_X} and AllReduce. Both are priced.
  const Topology topo = Pod("v5p:8", "x");
  auto plan = Plan("A[I, J_X] * B[J, K] -> C[I, K]", "I=1024,J=8192,K=64", topo);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const MatmulCandidate* gather = FindCandidate(*plan, "AllGather_X A, multiply");
  const MatmulCandidate* reduce = FindCandidate(*plan, "DynamicSlice_X B, multiply, AllReduce_X");
  ASSERT_NE(gather, nullptr);
  ASSERT_NE(reduce, nullptr);
  EXPECT_EQ(Notations(*gather), (std::vector<std::string>{"AllGather_X A[I, J_X] -> A[I, J]",
                                                          "A[I, J] * B[J, K] -> C[I, K]"}));
  EXPECT_EQ(Notations(*reduce)[2], "AllReduce_X C[I, K]{U_X} -> C[I, K]");
  // Seed rules, bf16: AllGather moves V (N-1)/N per chip with V = 2 I J;
  // AllReduce 2 V (N-1)/N with V = 2 I K. Flops: full vs 1/X.
  EXPECT_EQ(gather->comm_bytes_per_chip, 2ull * 1024 * 8192 * 7 / 8);
  EXPECT_EQ(reduce->comm_bytes_per_chip, 2 * 2ull * 1024 * 64 * 7 / 8);
  EXPECT_EQ(gather->flops_per_chip, 2ull * 1024 * 8192 * 64);
  EXPECT_EQ(reduce->flops_per_chip, 2ull * 1024 * 8192 * 64 / 8);
  // K << J: reducing the small product is far cheaper than gathering A (the
  // seed's M/K ratio), and the plan says so with both costs.
  EXPECT_EQ(plan->chosen().summary, reduce->summary);
  EXPECT_THAT(plan->why, HasSubstr("chose 'DynamicSlice_X B, multiply, AllReduce_X'"));
  EXPECT_THAT(plan->why, HasSubstr("over the runner-up 'AllGather_X A, multiply'"));

  // With K >> J the other way round wins.
  auto wide = Plan("A[I, J_X] * B[J, K] -> C[I, K]", "I=1024,J=64,K=8192", topo);
  ASSERT_TRUE(wide.ok());
  EXPECT_EQ(wide->chosen().summary, "AllGather_X A, multiply");
}

TEST(MatmulPlanTest, Case3ReducesAsTheOutputShardingAsks) {
  const Topology topo = Pod("v5p:8", "x");
  const std::string dims = "I=512,J=1024,K=256";
  auto ar = Plan("A[I, J_X] * B[J_X, K] -> C[I, K]", dims, topo);
  ASSERT_TRUE(ar.ok()) << ar.status();
  EXPECT_EQ(Notations(ar->chosen()), (std::vector<std::string>{"A[I, J_X] * B[J_X, K] -> C[I, K]{U_X}",
                                                               "AllReduce_X C[I, K]{U_X} -> C[I, K]"}));
  auto rs = Plan("A[I, J_X] * B[J_X, K] -> C[I_X, K]", dims, topo);
  ASSERT_TRUE(rs.ok());
  EXPECT_EQ(Notations(rs->chosen())[1], "ReduceScatter_{X,I} C[I, K]{U_X} -> C[I_X, K]");
  EXPECT_EQ(rs->chosen().comm_bytes_per_chip, 2ull * 512 * 256 * 7 / 8);
  auto keep = Plan("A[I, J_X] * B[J_X, K] -> C[I, K]{U_X}", dims, topo);
  ASSERT_TRUE(keep.ok());
  EXPECT_EQ(Notations(keep->chosen()), std::vector<std::string>{"A[I, J_X] * B[J_X, K] -> C[I, K]{U_X}"});
}

TEST(MatmulPlanTest, Case4GathersOneSideAsTheOutputNeeds) {
  const Topology topo = Pod("v5p:8", "x");
  auto keep_i = Plan("A[I_X, J] * B[J, K_X] -> C[I_X, K]", "I=512,J=256,K=1024", topo);
  ASSERT_TRUE(keep_i.ok()) << keep_i.status();
  EXPECT_EQ(Notations(keep_i->chosen())[0], "AllGather_X B[J, K_X] -> B[J, K]");
  auto keep_k = Plan("A[I_X, J] * B[J, K_X] -> C[I, K_X]", "I=512,J=256,K=1024", topo);
  ASSERT_TRUE(keep_k.ok());
  EXPECT_EQ(Notations(keep_k->chosen())[0], "AllGather_X A[I_X, J] -> A[I, J]");
}

TEST(MatmulPlanTest, FullyShardedSeed002WalkthroughDoesNoDuplicateWork) {
  // Seed 002: A (4x16) and B (16x4) fully sharded on a 2x4 mesh.
  const Topology topo = Pod("v5p:2x4");
  auto plan = Plan("A[I_X, J_Y] * B[J_X, K_Y] -> C[I_X, K_Y]", "I=4,J=16,K=4", topo);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->chosen().flops_per_chip, 2ull * 4 * 16 * 4 / 8);
}

TEST(MatmulPlanTest, GspmdFeedForwardSpecs) {
  // Seed 002's FFN on a 2x4 mesh: embed -> hidden gathers the contracting M
  // on both sides; hidden -> embed gathers Wout's M and reduce-scatters.
  const Topology topo = Pod("v5p:2x4");
  const std::string dims = "B=8,S=16,M=64,H=256";
  auto in = Plan("X[B_X, S, M_Y] * Win[M_X, H_Y] -> Hid[B_X, S, H_Y]", dims, topo);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(Notations(in->chosen()), (std::vector<std::string>{"AllGather_Y X[B_X, S, M_Y] -> X[B_X, S, M]",
                                                               "AllGather_X Win[M_X, H_Y] -> Win[M, H_Y]",
                                                               "X[B_X, S, M] * Win[M, H_Y] -> Hid[B_X, S, H_Y]"}));
  EXPECT_EQ(in->chosen().flops_per_chip, 2ull * 8 * 16 * 64 * 256 / 8);
  auto out = Plan("Hid[B_X, S, H_Y] * Wout[H_Y, M_X] -> Out[B_X, S, M_Y]", dims, topo);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Notations(out->chosen()),
            (std::vector<std::string>{"AllGather_X Wout[H_Y, M_X] -> Wout[H_Y, M]",
                                      "Hid[B_X, S, H_Y] * Wout[H_Y, M] -> Out[B_X, S, M]{U_Y}",
                                      "ReduceScatter_{Y,M} Out[B_X, S, M]{U_Y} -> Out[B_X, S, M_Y]"}));
  EXPECT_EQ(out->chosen().flops_per_chip, 2ull * 8 * 16 * 64 * 256 / 8);
}

}  // namespace
}  // namespace tpuemu
