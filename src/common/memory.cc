#include "common/memory.h"

#include <malloc.h>

namespace ag {

void keep_freed_memory() {
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 64 << 20);
}

}  // namespace ag
