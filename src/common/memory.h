// How the C library hands memory back. Commands that build and free answers of several
// MiB many times a second (the head's pages of logs, `ag logs` reading them) keep what
// they free for the next one: the kernel's fresh pages cost a fault each, several
// microseconds apiece on virtual machines.
#pragma once

namespace ag {

// Large blocks come from the heap and up to 64 MiB of freed memory stays with the
// process (the C library's defaults hand blocks of a few MiB back at once); the
// process keeps to two malloc arenas, so threads do not each hold freed pages.
void keep_freed_memory();

}  // namespace ag
