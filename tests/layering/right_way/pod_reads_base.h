// Not built: a pod module file that uses only what lies below it, which the
// layering check must accept (tests/layering/CMakeLists.txt).
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "core/base/units.h"
