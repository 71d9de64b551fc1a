// Translation between the worker contract's and the registrar's core types
// (core/cluster) and tpuemu.v1 messages, for their gRPC clients and services.
#pragma once

#include "core/cluster/registrar.h"
#include "core/cluster/worker_interface.h"
#include "tpuemu/v1/coordinator.pb.h"
#include "tpuemu/v1/worker.pb.h"

namespace tpuemu {

PodConfig FromProto(const v1::ConfigureRequest& proto);
v1::ConfigureRequest ToProto(const PodConfig& config);

WorkerStatusView FromProto(const v1::WorkerStatus& proto);
v1::WorkerStatus ToProto(const WorkerStatusView& status);

PlaceRequest FromProto(const v1::RegisterWorkerRequest& proto);
v1::RegisterWorkerRequest ToProto(const PlaceRequest& request);

GrantedPlace FromProto(const v1::RegisterWorkerResponse& proto);
v1::RegisterWorkerResponse ToProto(const GrantedPlace& place);

}  // namespace tpuemu
