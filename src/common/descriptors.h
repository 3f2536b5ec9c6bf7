// The daemons' descriptor budget. Each connection, task log and package download holds
// one; the usual soft limit (1,024) is far below what a busy head needs, while the hard
// limit is usually far above.
#pragma once

#include <cstdint>

namespace ag {

// Raises this process's soft RLIMIT_NOFILE to its hard limit; returns the limit now in
// force (unchanged when it cannot be raised).
uint64_t raise_descriptor_limit();

}  // namespace ag
