#include "worker/worker_place.h"

#include <netdb.h>
#include <unistd.h>

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace tpuemu {
namespace {

// An index from the environment: a whole number >= 0, or an error naming the
// variable, its value and what is allowed.
absl::StatusOr<int> EnvIndex(const std::string& name, const std::string& value, const std::string& what) {
  int n = 0;
  if (!absl::SimpleAtoi(value, &n) || n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, "='", value, "': must be ", what, ", a whole number from 0"));
  }
  return n;
}

// "worker-3.svc.ns" -> "worker-3": hostnames are compared by their first label,
// so TPU_WORKER_HOSTNAMES may hold short names or fully qualified ones.
std::string FirstLabel(const std::string& name) {
  return absl::AsciiStrToLower(std::string(name.substr(0, name.find('.'))));
}

// The -N suffix of a StatefulSet pod's hostname ("worker-s1-3" -> 3).
std::optional<int> OrdinalSuffix(const std::string& hostname) {
  const std::string label = FirstLabel(hostname);
  const size_t dash = label.rfind('-');
  int n = 0;
  if (dash == std::string::npos || dash + 1 == label.size() || !absl::SimpleAtoi(label.substr(dash + 1), &n) ||
      n < 0) {
    return std::nullopt;
  }
  return n;
}

struct HostSource {
  int host = -1;
  std::string source;
};

absl::StatusOr<HostSource> FindHost(const PlaceInputs& in) {
  if (in.flag_host) {
    if (*in.flag_host < 0) {
      return absl::InvalidArgumentError(absl::StrCat("--host ", *in.flag_host, ": must be a host index from 0"));
    }
    return HostSource{*in.flag_host, absl::StrCat("--host ", *in.flag_host)};
  }
  if (auto id = in.env("TPU_WORKER_ID")) {
    auto n = EnvIndex("TPU_WORKER_ID", *id, "this host's index in its slice");
    if (!n.ok()) return n.status();
    return HostSource{*n, absl::StrCat("TPU_WORKER_ID=", *id)};
  }
  if (auto names = in.env("TPU_WORKER_HOSTNAMES")) {
    // Empty entries keep their places: each entry's position is a host index.
    std::vector<std::string> list = absl::StrSplit(*names, ',');
    for (size_t i = 0; i < list.size(); ++i) {
      if (FirstLabel(std::string(absl::StripAsciiWhitespace(list[i]))) == FirstLabel(in.hostname)) {
        return HostSource{static_cast<int>(i),
                          absl::StrCat("hostname ", in.hostname, " at position ", i, " of TPU_WORKER_HOSTNAMES")};
      }
    }
    return absl::InvalidArgumentError(absl::StrCat("TPU_WORKER_HOSTNAMES='", *names, "': this machine's hostname '",
                                                   in.hostname, "' is not in the list; set TPU_WORKER_ID or --host, "
                                                   "or list this host"));
  }
  if (auto index = in.env("TPUEMU_POD_INDEX")) {
    auto n = EnvIndex("TPUEMU_POD_INDEX", *index, "the StatefulSet pod's ordinal");
    if (!n.ok()) return n.status();
    return HostSource{*n, absl::StrCat("TPUEMU_POD_INDEX=", *index, " (StatefulSet ordinal)")};
  }
  // Outside Kubernetes a machine named like "build-3" is not a StatefulSet pod.
  if (in.env("KUBERNETES_SERVICE_HOST")) {
    if (auto n = OrdinalSuffix(in.hostname)) {
      return HostSource{*n, absl::StrCat("hostname ", in.hostname, " (StatefulSet ordinal ", *n, ")")};
    }
  }
  return HostSource{};
}

}  // namespace

absl::StatusOr<WorkerPlace> ResolveWorkerPlace(const PlaceInputs& in) {
  auto host = FindHost(in);
  if (!host.ok()) return host.status();
  WorkerPlace place;
  place.host = host->host;
  place.source = host->source;
  if (in.flag_slice) {
    if (*in.flag_slice < 0) {
      return absl::InvalidArgumentError(absl::StrCat("--slice ", *in.flag_slice, ": must be a slice index from 0"));
    }
    place.slice = *in.flag_slice;
    place.source = absl::StrCat("--slice ", place.slice, place.source.empty() ? "" : ", ", place.source);
  } else if (auto id = in.env("MEGASCALE_SLICE_ID")) {
    auto n = EnvIndex("MEGASCALE_SLICE_ID", *id, "this host's slice");
    if (!n.ok()) return n.status();
    place.slice = *n;
    place.source = absl::StrCat("MEGASCALE_SLICE_ID=", *id, place.source.empty() ? "" : ", ", place.source);
  } else if (place.host >= 0) {
    place.slice = 0;  // a host index alone: the single-slice convention
  }
  if (place.source.empty()) place.source = "no identity in flags or environment: the coordinator assigns a place";
  if (auto n = in.env("MEGASCALE_NUM_SLICES")) {
    int slices = 0;
    if (!absl::SimpleAtoi(*n, &slices) || slices < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("MEGASCALE_NUM_SLICES='", *n, "': must be the pod's number of slices, a whole number from 1"));
    }
    if (place.slice >= slices) {
      return absl::InvalidArgumentError(absl::StrCat(place.source, ": slice ", place.slice,
                                                     " is outside MEGASCALE_NUM_SLICES=", slices, " (slices 0 to ",
                                                     slices - 1, ")"));
    }
    place.num_slices = slices;
  }
  return place;
}

absl::StatusOr<std::string> ResolveCoordinatorAddress(const std::string& flag, const PlaceInputs& in) {
  if (!flag.empty()) return flag;
  if (auto megascale = in.env("MEGASCALE_COORDINATOR_ADDRESS")) {
    // HOST or HOST:PORT ([V6]:PORT); a bare IPv6 address has several colons.
    const bool has_port = megascale->find(':') != std::string::npos &&
                          (megascale->front() == '[' ? megascale->find("]:") != std::string::npos
                                                     : megascale->find(':') == megascale->rfind(':'));
    return has_port ? *megascale : absl::StrCat(*megascale, ":", kDefaultCoordinatorPort);
  }
  return absl::InvalidArgumentError(
      "no coordinator: pass --coordinator HOST:PORT, or set TPUEMU_COORDINATOR or MEGASCALE_COORDINATOR_ADDRESS");
}

std::string AdvertiseHost(const std::string& flag, const std::string& listen,
                          const std::function<std::string()>& canonical_hostname) {
  if (!flag.empty()) return flag;
  const std::string host = listen.substr(0, listen.rfind(':'));
  if (host.empty() || host == "0.0.0.0" || host == "[::]" || host == "::" || host == "*") return canonical_hostname();
  return host;
}

std::string Hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

std::string CanonicalHostname() {
  const std::string name = Hostname();
  addrinfo hints{};
  hints.ai_flags = AI_CANONNAME;
  addrinfo* result = nullptr;
  if (getaddrinfo(name.c_str(), nullptr, &hints, &result) != 0 || result == nullptr) return name;
  std::string canonical = result->ai_canonname != nullptr ? result->ai_canonname : name;
  freeaddrinfo(result);
  return canonical;
}

}  // namespace tpuemu
