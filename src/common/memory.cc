#include "common/memory.h"

#include <malloc.h>

namespace ag {

void keep_freed_memory() {
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 64 << 20);
  // Few arenas: with freed pages kept, every thread with an arena of its own (the
  // webhook senders) would keep its own pile of them.
  ::mallopt(M_ARENA_MAX, 2);
}

}  // namespace ag
