#include "core/tensor/blis_memory.h"

#include <blis.h>

namespace tpuemu {

void ReleaseBlisMemory() { bli_finalize(); }

}  // namespace tpuemu
