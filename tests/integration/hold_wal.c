// A head loads this with LD_PRELOAD in tests: while the file named by AG_TEST_HOLD_WAL
// exists, a write to a SQLite write-ahead log (a file whose name ends in "-wal") waits,
// as a disk that has stopped answering would, but in a sleep the process can still be
// killed in. A head killed then has never written its change: not even to the page
// cache, which a killed process leaves behind.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static int is_wal(int fd) {
  char link[64];
  char path[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, path, sizeof path - 1);
  if (n < 4) return 0;
  path[n] = '\0';
  return strcmp(path + n - 4, "-wal") == 0;
}

static void hold(int fd) {
  const char* flag = getenv("AG_TEST_HOLD_WAL");
  if (!flag || access(flag, F_OK) != 0 || !is_wal(fd)) return;
  while (access(flag, F_OK) == 0) usleep(10000);
}

ssize_t pwrite64(int fd, const void* buf, size_t count, off_t offset) {
  static ssize_t (*real)(int, const void*, size_t, off_t);
  if (!real) real = (ssize_t(*)(int, const void*, size_t, off_t))dlsym(RTLD_NEXT, "pwrite64");
  hold(fd);
  return real(fd, buf, count, offset);
}

ssize_t pwrite(int fd, const void* buf, size_t count, off_t offset) { return pwrite64(fd, buf, count, offset); }

ssize_t write(int fd, const void* buf, size_t count) {
  static ssize_t (*real)(int, const void*, size_t);
  if (!real) real = (ssize_t(*)(int, const void*, size_t))dlsym(RTLD_NEXT, "write");
  hold(fd);
  return real(fd, buf, count);
}
