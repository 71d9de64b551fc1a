#include "worker/huge_pages.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace tpuemu {
namespace {

constexpr char kTunable[] = "glibc.malloc.hugetlb=1";

bool KernelGivesHugePagesOnRequest() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(f, line);
  return line.find("[madvise]") != std::string::npos;  // [always]: every process has them already
}

}  // namespace

void ExecWithHugePageMalloc(char** argv) {
  const char* opt_out = std::getenv("TPUEMU_HUGE_PAGES");
  if (opt_out != nullptr && std::string(opt_out) == "0") return;
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  const std::string current = tunables == nullptr ? "" : tunables;
  // Set already (by us before the exec, or by the user either way).
  if (current.find("glibc.malloc.hugetlb") != std::string::npos) return;
  if (!KernelGivesHugePagesOnRequest()) return;
  const std::string wanted = current.empty() ? kTunable : current + ":" + kTunable;
  if (setenv("GLIBC_TUNABLES", wanted.c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);
  // Could not exec (no /proc?): run on without huge pages.
  if (tunables == nullptr) unsetenv("GLIBC_TUNABLES");
  else setenv("GLIBC_TUNABLES", tunables, 1);
}

std::string HugePagesReport() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  return std::string("malloc: GLIBC_TUNABLES=") + (tunables == nullptr ? "(unset)" : tunables) +
         ", transparent huge pages: " + (KernelGivesHugePagesOnRequest() ? "on request" : "as the kernel decides");
}

}  // namespace tpuemu
