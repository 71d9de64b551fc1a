// Where a worker finds its place, source by source, in the documented order,
// and the errors for what no source may say.
#include "worker/worker_place.h"

#include <map>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tpuemu {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

PlaceInputs Inputs(std::map<std::string, std::string> env, const std::string& hostname = "host-a") {
  PlaceInputs in;
  in.env = [env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end() || it->second.empty()) return std::nullopt;
    return it->second;
  };
  in.hostname = hostname;
  return in;
}

WorkerPlace Place(const PlaceInputs& in) {
  auto p = ResolveWorkerPlace(in);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : WorkerPlace{};
}

TEST(WorkerPlaceTest, FlagsComeFirst) {
  PlaceInputs in = Inputs({{"TPU_WORKER_ID", "3"}, {"MEGASCALE_SLICE_ID", "1"}});
  in.flag_host = 2;
  in.flag_slice = 0;
  const WorkerPlace p = Place(in);
  EXPECT_EQ(p.slice, 0);
  EXPECT_EQ(p.host, 2);
  EXPECT_EQ(p.source, "--slice 0, --host 2");
}

TEST(WorkerPlaceTest, TpuWorkerIdWithMegascaleSliceId) {
  const WorkerPlace p = Place(Inputs({{"TPU_WORKER_ID", "3"}, {"MEGASCALE_SLICE_ID", "1"},
                                      {"MEGASCALE_NUM_SLICES", "2"}, {"TPUEMU_POD_INDEX", "0"}}));
  EXPECT_EQ(p.slice, 1);
  EXPECT_EQ(p.host, 3);
  EXPECT_EQ(p.num_slices, 2);
  EXPECT_EQ(p.source, "MEGASCALE_SLICE_ID=1, TPU_WORKER_ID=3");
}

TEST(WorkerPlaceTest, AHostIndexAloneMeansSliceZero) {
  const WorkerPlace p = Place(Inputs({{"TPU_WORKER_ID", "1"}}));
  EXPECT_EQ(p.slice, 0);
  EXPECT_EQ(p.host, 1);
}

TEST(WorkerPlaceTest, HostnamePositionInTpuWorkerHostnames) {
  // Short or fully qualified entries both match the hostname's first label.
  const WorkerPlace p = Place(Inputs({{"TPU_WORKER_HOSTNAMES", "job-slice-0-0.job, job-slice-0-1.job,job-slice-0-2"}},
                                     "job-slice-0-1"));
  EXPECT_EQ(p.host, 1);
  EXPECT_THAT(p.source, HasSubstr("position 1 of TPU_WORKER_HOSTNAMES"));
  EXPECT_EQ(Place(Inputs({{"TPU_WORKER_HOSTNAMES", "a,b,c"}}, "c.svc.cluster.local")).host, 2);
  EXPECT_EQ(Place(Inputs({{"TPU_WORKER_HOSTNAMES", "a,,c"}}, "c")).host, 2);
}

TEST(WorkerPlaceTest, AHostnameMissingFromTheListIsAnError) {
  auto p = ResolveWorkerPlace(Inputs({{"TPU_WORKER_HOSTNAMES", "a,b"}}, "z"));
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), AllOf(HasSubstr("TPU_WORKER_HOSTNAMES='a,b'"), HasSubstr("'z'")));
}

TEST(WorkerPlaceTest, StatefulSetOrdinalFromTheDownwardApi) {
  const WorkerPlace p = Place(Inputs({{"TPUEMU_POD_INDEX", "4"}, {"MEGASCALE_SLICE_ID", "2"}}, "tpuemu-worker-s2-4"));
  EXPECT_EQ(p.slice, 2);
  EXPECT_EQ(p.host, 4);
  EXPECT_THAT(p.source, HasSubstr("StatefulSet ordinal"));
}

TEST(WorkerPlaceTest, HostnameSuffixOnlyInKubernetes) {
  // A machine called build-3 outside Kubernetes is not StatefulSet pod 3.
  EXPECT_EQ(Place(Inputs({}, "build-3")).host, -1);
  const WorkerPlace p = Place(Inputs({{"KUBERNETES_SERVICE_HOST", "10.0.0.1"}}, "tpuemu-worker-s0-3.svc"));
  EXPECT_EQ(p.host, 3);
  EXPECT_EQ(p.slice, 0);
  // An empty pod-index label (clusters before 1.28) falls through to the suffix.
  EXPECT_EQ(Place(Inputs({{"KUBERNETES_SERVICE_HOST", "10.0.0.1"}, {"TPUEMU_POD_INDEX", ""}}, "w-7")).host, 7);
}

TEST(WorkerPlaceTest, NothingSaidMeansTheCoordinatorAssigns) {
  const WorkerPlace p = Place(Inputs({}, "3f2a9c1d"));
  EXPECT_EQ(p.slice, -1);
  EXPECT_EQ(p.host, -1);
  EXPECT_THAT(p.source, HasSubstr("coordinator assigns"));
  // A slice alone: the coordinator assigns a host within it.
  const WorkerPlace s = Place(Inputs({{"MEGASCALE_SLICE_ID", "1"}}));
  EXPECT_EQ(s.slice, 1);
  EXPECT_EQ(s.host, -1);
}

TEST(WorkerPlaceTest, BadValuesNameTheVariableAndWhatIsAllowed) {
  for (const auto& [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"TPU_WORKER_ID", "two"}, {"TPU_WORKER_ID", "-1"}, {"MEGASCALE_SLICE_ID", "1.5"},
           {"TPUEMU_POD_INDEX", "x"}, {"MEGASCALE_NUM_SLICES", "0"}}) {
    auto p = ResolveWorkerPlace(Inputs({{name, value}}));
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << name << "=" << value;
    EXPECT_THAT(p.status().message(), AllOf(HasSubstr(name), HasSubstr("'" + value + "'"), HasSubstr("must be")));
  }
  PlaceInputs in = Inputs({});
  in.flag_host = -2;
  EXPECT_THAT(ResolveWorkerPlace(in).status().message(), HasSubstr("--host -2"));
}

TEST(WorkerPlaceTest, ASliceBeyondMegascaleNumSlicesIsAnError) {
  auto p = ResolveWorkerPlace(Inputs({{"MEGASCALE_SLICE_ID", "2"}, {"MEGASCALE_NUM_SLICES", "2"}}));
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), AllOf(HasSubstr("slice 2"), HasSubstr("MEGASCALE_NUM_SLICES=2")));
}

TEST(WorkerPlaceTest, CoordinatorAddressFromFlagThenMegascale) {
  EXPECT_EQ(*ResolveCoordinatorAddress("c:1", Inputs({{"MEGASCALE_COORDINATOR_ADDRESS", "m:2"}})), "c:1");
  EXPECT_EQ(*ResolveCoordinatorAddress("", Inputs({{"MEGASCALE_COORDINATOR_ADDRESS", "m:2"}})), "m:2");
  EXPECT_EQ(*ResolveCoordinatorAddress("", Inputs({{"MEGASCALE_COORDINATOR_ADDRESS", "m"}})), "m:50051");
  EXPECT_EQ(*ResolveCoordinatorAddress("", Inputs({{"MEGASCALE_COORDINATOR_ADDRESS", "[::1]:7"}})), "[::1]:7");
  auto none = ResolveCoordinatorAddress("", Inputs({}));
  EXPECT_THAT(none.status().message(),
              AllOf(HasSubstr("--coordinator"), HasSubstr("TPUEMU_COORDINATOR"), HasSubstr("MEGASCALE_COORDINATOR")));
}

TEST(WorkerPlaceTest, AdvertisedNameIsNeverLoopbackUnlessListeningThere) {
  auto canonical = [] { return std::string("pod-3.workers.ns.svc.cluster.local"); };
  EXPECT_EQ(AdvertiseHost("", "127.0.0.1:0", canonical), "127.0.0.1");
  EXPECT_EQ(AdvertiseHost("", "0.0.0.0:8471", canonical), "pod-3.workers.ns.svc.cluster.local");
  EXPECT_EQ(AdvertiseHost("", "[::]:8471", canonical), "pod-3.workers.ns.svc.cluster.local");
  EXPECT_EQ(AdvertiseHost("w1", "0.0.0.0:8471", canonical), "w1");
}

}  // namespace
}  // namespace tpuemu
