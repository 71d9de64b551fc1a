// Prometheus' text exposition format (version 0.0.4), written one way by
// every process that serves /metrics (the coordinator's and the workers').
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace tpuemu {

// "# HELP name help\n# TYPE name type\n".
void WriteMetricHeader(std::string& out, const std::string& name, const std::string& type, const std::string& help);
// "name{a="1",b="x"} value\n", label values escaped as the format asks, the
// value the shortest text that reads back as the same double.
void WriteSample(std::string& out, const std::string& name, const std::vector<std::pair<std::string, std::string>>& labels,
                 double value);
// That shortest text ("+Inf" for infinity).
std::string PrometheusNumber(double v);

}  // namespace tpuemu
