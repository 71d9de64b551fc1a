#include "client/job_file.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "core/base/bounded_file.h"
#include "core/base/utf8.h"
#include "core/train/config.h"
#include "core/train/job.h"

namespace tpuemu {

absl::StatusOr<TrainSpec> ReadJobFile(const std::string& path, bool shape_only) {
  auto text = ReadFileAtMost(path, kMaxJobFileBytes, "job file");
  if (!text.ok()) return text.status();
  // The path is the job's source, in its record, its JSON and the `jobs`
  // table: a name that is not UTF-8, or holds a newline, is kept readable.
  return ParseTrainSpec(*text, PrintableText(path), shape_only);
}

absl::Status NamingTheFile(const absl::Status& refusal, const std::string& name, const std::string& path) {
  absl::string_view message = refusal.message();
  if (!absl::IsInvalidArgument(refusal) || absl::StartsWith(message, "`")) return refusal;
  for (const std::string& prefix : {name + ": ", std::string("job: ")}) {
    if (absl::ConsumePrefix(&message, prefix)) break;
  }
  return absl::Status(refusal.code(), absl::StrCat(path, ": ", message));
}

}  // namespace tpuemu
