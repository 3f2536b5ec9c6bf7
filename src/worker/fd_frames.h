// Frames on the Unix sockets between an agent, its task supervisor and the
// supervisor's ready-made task processes (worker/warm_task.h): a 4-byte length, then
// the payload; one descriptor may ride along with the length (SCM_RIGHTS).
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>

namespace ag::worker {

// A frame's length and the descriptor passed with it, laid out for one recvmsg(2)
// (MSG_CMSG_CLOEXEC): what read_frame receives first, and all a ready-made process,
// which may not allocate, receives.
struct FrameHead {
  FrameHead();
  FrameHead(const FrameHead&) = delete;
  FrameHead& operator=(const FrameHead&) = delete;
  // The descriptor received, or -1.
  int passed_fd() const;

  uint32_t length = 0;
  iovec iov;
  msghdr msg{};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
};

// Sends one frame, with `pass_fd` when it is >= 0. False when the peer is gone.
bool write_frame(int fd, const std::string& payload, int pass_fd);

// Reads one frame; `received_fd` gets a descriptor passed with it (close-on-exec), or
// -1. False at the end of the stream or on a malformed frame.
bool read_frame(int fd, std::string* payload, int* received_fd);

}  // namespace ag::worker
