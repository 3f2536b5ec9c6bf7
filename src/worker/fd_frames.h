// Frames on the Unix sockets between an agent, its task supervisor and the
// supervisor's ready-made task processes (worker/warm_task.h): a 4-byte length, then
// the payload; one descriptor may ride along with the length (SCM_RIGHTS).
#pragma once

#include <string>

namespace ag::worker {

// Sends one frame, with `pass_fd` when it is >= 0. False when the peer is gone.
bool write_frame(int fd, const std::string& payload, int pass_fd);

// Reads one frame; `received_fd` gets a descriptor passed with it (close-on-exec), or
// -1. False at the end of the stream or on a malformed frame.
bool read_frame(int fd, std::string* payload, int* received_fd);

}  // namespace ag::worker
