// A training job's spec to and from tpuemu.v1: the typed job file, every key
// copied as it is (checking is PlanTrainJob's, wherever the spec arrives).
#pragma once

#include "core/train/job.h"
#include "tpuemu/v1/train.pb.h"

namespace tpuemu {

v1::TrainConfig ToProto(const TrainConfig& config);
TrainConfig FromProto(const v1::TrainConfig& proto);
v1::TrainSpec ToProto(const TrainSpec& spec);
TrainSpec FromProto(const v1::TrainSpec& proto);

}  // namespace tpuemu
