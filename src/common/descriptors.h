// The daemons' descriptor budget. Each connection, task log and package download holds
// one; the usual soft limit (1,024) is far below what a busy head needs, while the hard
// limit is usually far above. A daemon takes the hard limit at start, refuses to start
// below what it cannot work without, and names the limit and its fix wherever a call
// fails for want of descriptors.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"

namespace ag {

// Raises this process's soft RLIMIT_NOFILE to its hard limit; returns the limit now in
// force (unchanged when it cannot be raised).
uint64_t raise_descriptor_limit();

// raise_descriptor_limit(), then an error naming the limit and how to raise it when it is
// below `minimum` (what `daemon`, "the head" or "the worker", cannot work without).
Result<uint64_t> claim_descriptors(const std::string& daemon, uint64_t minimum);

// For an error from a call that makes a descriptor: " (...)" saying which limit was hit
// and how to raise it (EMFILE: this process's; ENFILE: the whole system's); "" for any
// other error.
std::string descriptor_limit_hint(int error_number);

// close_range(2) of descriptors `first` and up: closed, or with `cloexec` only marked
// close-on-exec. Through the system call itself, since glibc's wrapper is 2.34's, newer
// than the portable binary's glibc (docs/adr/0009). 0, or -1 with errno (ENOSYS on
// kernels before 5.9, EINVAL for `cloexec` before 5.11).
int close_descriptors_from(unsigned first, bool cloexec);

}  // namespace ag
