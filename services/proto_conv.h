// Translation between the core's types and tpuemu.v1 messages.
#pragma once

#include "absl/status/statusor.h"
#include "core/collective_report.h"
#include "core/collective_spec.h"
#include "core/pod_config.h"
#include "tpuemu/v1/collective.pb.h"
#include "tpuemu/v1/pod.pb.h"

namespace tpuemu {

v1::CollectiveSpec ToProto(const CollectiveSpec& spec);
absl::StatusOr<CollectiveSpec> FromProto(const v1::CollectiveSpec& proto);

v1::TopologySpec ToProto(const TopologyRequest& req, double time_scale);
TopologyRequest FromProto(const v1::TopologySpec& proto);

v1::ChipResult ToProto(const ChipRunResult& r);
absl::StatusOr<ChipRunResult> FromProto(const v1::ChipResult& proto);

v1::CollectiveResult ToProto(const CollectiveReport& r);

}  // namespace tpuemu
