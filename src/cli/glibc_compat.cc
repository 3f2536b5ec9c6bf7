// Linked into the portable `ag` only (scripts/build-portable.sh, docs/adr/0009): that
// binary is linked against glibc 2.31 (Debian 11's, the oldest the release supports),
// while the static libstdc++ and libgcc it carries are Debian 12's, built against glibc
// 2.36. They refer to three symbols glibc 2.31 lacks; this file defines them, so that
// the binary asks nothing of the system's glibc newer than 2.31. Where the system's glibc
// has them too, these serve `ag` alone.
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

extern "C" {

// glibc >= 2.32 sets this to 1 while the process has one thread, and libstdc++ then skips
// atomic operations on reference counts. Always 0 here: atomics always, which is correct
// whatever the number of threads.
char __libc_single_threaded = 0;

// glibc >= 2.36: std::random_device's default source. The kernel's random numbers
// (getrandom, Linux >= 3.17; /dev/urandom before it); without either there is no safe
// answer, and glibc's own arc4random aborts too.
uint32_t arc4random(void) noexcept {
  uint32_t value;
  size_t got = 0;
  while (got < sizeof value) {
    const ssize_t n = ::getrandom(reinterpret_cast<char*>(&value) + got, sizeof value - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  if (got == sizeof value) return value;
  const int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    got = 0;
    while (got < sizeof value) {
      const ssize_t n = ::read(fd, reinterpret_cast<char*>(&value) + got, sizeof value - got);
      if (n > 0) {
        got += static_cast<size_t>(n);
      } else if (!(n < 0 && errno == EINTR)) {
        break;
      }
    }
    ::close(fd);
    if (got == sizeof value) return value;
  }
  static const char kMessage[] = "ag: no source of random numbers (getrandom, /dev/urandom)\n";
  (void)!::write(2, kMessage, sizeof kMessage - 1);
  std::abort();
}

// glibc >= 2.35: how libgcc's unwinder finds the exception tables of the object holding
// an address, without which no C++ exception can be caught. The same answer from
// dl_iterate_phdr (what the unwinder used before): the loaded object whose PT_LOAD
// segment holds `pc`, and its PT_GNU_EH_FRAME (.eh_frame_hdr).
namespace {
struct FindRequest {
  uintptr_t pc;
  dl_find_object* result;
  bool found;
};

int find_object_of(dl_phdr_info* info, size_t, void* data) {
  auto* request = static_cast<FindRequest*>(data);
  const ElfW(Phdr)* load = nullptr;
  const ElfW(Phdr)* eh_frame = nullptr;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& phdr = info->dlpi_phdr[i];
    if (phdr.p_type == PT_LOAD) {
      const uintptr_t start = info->dlpi_addr + phdr.p_vaddr;
      if (request->pc >= start && request->pc < start + phdr.p_memsz) load = &phdr;
    } else if (phdr.p_type == PT_GNU_EH_FRAME) {
      eh_frame = &phdr;
    }
  }
  if (load == nullptr) return 0;  // not this object: go on
  std::memset(request->result, 0, sizeof *request->result);
  request->result->dlfo_map_start = reinterpret_cast<void*>(info->dlpi_addr + load->p_vaddr);
  request->result->dlfo_map_end = reinterpret_cast<void*>(info->dlpi_addr + load->p_vaddr + load->p_memsz);
  request->result->dlfo_eh_frame =
      eh_frame == nullptr ? nullptr : reinterpret_cast<void*>(info->dlpi_addr + eh_frame->p_vaddr);
  request->found = true;
  return 1;  // found: stop
}
}  // namespace

int _dl_find_object(void* pc, dl_find_object* result) noexcept {
  FindRequest request{reinterpret_cast<uintptr_t>(pc), result, false};
  ::dl_iterate_phdr(find_object_of, &request);
  return request.found ? 0 : -1;
}

}  // extern "C"
