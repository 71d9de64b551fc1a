#include "services/cluster_conv.h"

#include "services/proto_conv.h"

namespace tpuemu {

PodConfig FromProto(const v1::ConfigureRequest& proto) {
  PodConfig config;
  config.topology = FromProto(proto.spec());
  config.time_scale = proto.spec().time_scale();
  for (const v1::WorkerInfo& w : proto.workers()) {
    config.host_addresses[w.host()] = w.address();
    if (!w.machine().empty()) config.host_machines[w.host()] = w.machine();
  }
  return config;
}

v1::ConfigureRequest ToProto(const PodConfig& config) {
  v1::ConfigureRequest proto;
  *proto.mutable_spec() = ToProto(config.topology, config.time_scale);
  for (const auto& [host, address] : config.host_addresses) {
    v1::WorkerInfo* w = proto.add_workers();
    w->set_host(host);
    w->set_address(address);
    if (auto m = config.host_machines.find(host); m != config.host_machines.end()) w->set_machine(m->second);
  }
  return proto;
}

WorkerStatusView FromProto(const v1::WorkerStatus& proto) {
  WorkerStatusView status;
  status.host = proto.global_host();
  status.chips.assign(proto.chips().begin(), proto.chips().end());
  status.configured = proto.configured();
  status.running_job = proto.running_job();
  status.frames_waiting = proto.frames_waiting();
  status.frames_dropped = proto.frames_dropped();
  return status;
}

v1::WorkerStatus ToProto(const WorkerStatusView& status) {
  v1::WorkerStatus proto;
  proto.set_global_host(status.host);
  for (int c : status.chips) proto.add_chips(c);
  proto.set_configured(status.configured);
  proto.set_running_job(status.running_job);
  proto.set_frames_waiting(status.frames_waiting);
  proto.set_frames_dropped(status.frames_dropped);
  return proto;
}

PlaceRequest FromProto(const v1::RegisterWorkerRequest& proto) {
  return {proto.slice(), proto.host(), proto.address(), proto.num_slices(), proto.place_source(), proto.machine()};
}

v1::RegisterWorkerRequest ToProto(const PlaceRequest& request) {
  v1::RegisterWorkerRequest proto;
  proto.set_slice(request.slice);
  proto.set_host(request.host);
  proto.set_address(request.address);
  proto.set_num_slices(request.num_slices);
  proto.set_place_source(request.place_source);
  proto.set_machine(request.machine);
  return proto;
}

GrantedPlace FromProto(const v1::RegisterWorkerResponse& proto) {
  return {proto.global_host(), proto.slice(), proto.host(), proto.incarnation(),
          absl::Seconds(proto.heartbeat_timeout_s())};
}

v1::RegisterWorkerResponse ToProto(const GrantedPlace& place) {
  v1::RegisterWorkerResponse proto;
  proto.set_global_host(place.global_host);
  proto.set_slice(place.slice);
  proto.set_host(place.host);
  proto.set_incarnation(place.incarnation);
  if (place.heartbeat_timeout != absl::InfiniteDuration()) {
    proto.set_heartbeat_timeout_s(absl::ToDoubleSeconds(place.heartbeat_timeout));
  }
  return proto;
}

}  // namespace tpuemu
