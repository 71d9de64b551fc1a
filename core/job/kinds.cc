#include "core/job/kinds.h"

#include <map>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/collective/kind.h"
#include "core/matmul/kind.h"
#include "core/train/kind.h"

namespace tpuemu {
namespace {

class Registry {
 public:
  Registry() {
    for (auto* make : {&MakeCollectiveKind, &MakeMatmulKind, &MakeTrainKind}) {
      std::unique_ptr<JobKind> kind = make();
      const std::string name = kind->name();
      kinds_.emplace(name, std::move(kind));
    }
  }

  absl::StatusOr<const JobKind*> Find(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = kinds_.find(name);
    if (it != kinds_.end()) return it->second.get();
    return absl::InvalidArgumentError(
        absl::StrCat("job kind '", name, "': no such kind; allowed: ", absl::StrJoin(NamesLocked(), ", ")));
  }

  std::vector<std::string> Names() {
    std::lock_guard<std::mutex> lock(mu_);
    return NamesLocked();
  }

  absl::Status Add(std::unique_ptr<JobKind> kind) {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string name = kind->name();
    if (!kinds_.emplace(name, std::move(kind)).second) {
      return absl::AlreadyExistsError(absl::StrCat("job kind '", name, "' is registered already"));
    }
    return absl::OkStatus();
  }

 private:
  std::vector<std::string> NamesLocked() const {
    std::vector<std::string> names;
    for (const auto& [known, _] : kinds_) names.push_back(known);
    return names;
  }

  std::mutex mu_;
  std::map<std::string, std::unique_ptr<JobKind>> kinds_;
};

Registry& Kinds() {
  static Registry* registry = new Registry();  // never destroyed: kinds outlive every job
  return *registry;
}

}  // namespace

absl::StatusOr<const JobKind*> FindJobKind(const std::string& name) { return Kinds().Find(name); }

absl::Status RegisterJobKind(std::unique_ptr<JobKind> kind) { return Kinds().Add(std::move(kind)); }

std::vector<std::string> JobKindNames() { return Kinds().Names(); }

absl::StatusOr<std::unique_ptr<PlannedJob>> PlanJob(const JobSpec& spec, const Topology& topo, double time_scale) {
  auto kind = FindJobKind(spec.kind());
  if (!kind.ok()) return kind.status();
  return (*kind)->Plan(spec, topo, time_scale);
}

}  // namespace tpuemu
