// Not built: a pod module file that reaches up into training, which the
// layering check must refuse (tests/layering/CMakeLists.txt).
#pragma once

#include "core/base/units.h"
#include "core/train/config.h"
