#include "client/job_file.h"

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

}  // namespace tpuemu
