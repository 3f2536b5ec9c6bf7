#include "worker/fd_frames.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace ag::worker {
namespace {

constexpr uint32_t kMaxFrameBytes = 64u << 20;

bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool read_all(int fd, char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::read(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

bool write_frame(int fd, const std::string& payload, int pass_fd) {
  uint32_t length = static_cast<uint32_t>(payload.size());
  // Length and payload in one call: the reader wakes once, with the whole frame there
  // (woken by a first part, it could take the writer's CPU before the rest is sent).
  iovec iov[2] = {{&length, sizeof length}, {const_cast<char*>(payload.data()), payload.size()}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 2;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (pass_fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(cmsg), &pass_fd, sizeof(int));
  }
  ssize_t n;
  do {
    n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return false;
  size_t sent = static_cast<size_t>(n);
  if (sent < sizeof length) {
    if (!write_all(fd, reinterpret_cast<const char*>(&length) + sent, sizeof length - sent)) return false;
    sent = sizeof length;
  }
  const size_t payload_sent = sent - sizeof length;
  return write_all(fd, payload.data() + payload_sent, payload.size() - payload_sent);
}

FrameHead::FrameHead() : iov{&length, sizeof length} {
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
}

int FrameHead::passed_fd() const {
  int fd = -1;
  auto* header = const_cast<msghdr*>(&msg);  // the macros take no const
  for (cmsghdr* cmsg = CMSG_FIRSTHDR(header); cmsg; cmsg = CMSG_NXTHDR(header, cmsg)) {
    if (cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS) std::memcpy(&fd, CMSG_DATA(cmsg), sizeof fd);
  }
  return fd;
}

bool read_frame(int fd, std::string* payload, int* received_fd) {
  *received_fd = -1;
  FrameHead head;
  ssize_t n;
  do {
    n = ::recvmsg(fd, &head.msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return false;
  *received_fd = head.passed_fd();
  uint32_t& length = head.length;
  if (static_cast<size_t>(n) < sizeof length &&
      !read_all(fd, reinterpret_cast<char*>(&length) + n, sizeof length - static_cast<size_t>(n))) {
    if (*received_fd >= 0) ::close(*received_fd);
    *received_fd = -1;
    return false;
  }
  payload->resize(length <= kMaxFrameBytes ? length : 0);
  if (length > kMaxFrameBytes || !read_all(fd, payload->data(), length)) {
    if (*received_fd >= 0) ::close(*received_fd);
    *received_fd = -1;
    return false;
  }
  return true;
}

}  // namespace ag::worker
