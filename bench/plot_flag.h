// A sweep benchmark's optional first argument, `--plot FILE.svg|FILE.png`
// (client/plots.h draws the chart): taken off argv so that the positional
// arguments follow as before.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "client/plots.h"

namespace tpuemu {

// The chart's path ("" without --plot); exits with 2 on a name that is
// neither .svg nor .png, before the sweep runs.
inline std::string TakePlotFlag(int& argc, char**& argv) {
  if (argc < 3 || std::string(argv[1]) != "--plot") return "";
  std::string plot = argv[2];
  if (auto s = CheckChartPath("--plot", plot); !s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    std::exit(2);
  }
  argv += 2;
  argc -= 2;
  return plot;
}

}  // namespace tpuemu
