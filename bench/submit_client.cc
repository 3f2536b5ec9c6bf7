// A lean REST client for the throughput benchmarks: submits N jobs to the head one after
// another on one keep-alive HTTP connection, each after the answer to the one before,
// as a user's program in a compiled language would. The benchmarks measure what a job
// costs the head and workers; a client in C++ costs the machine about what the spawn
// floor's own loop does, where Python's http.client costs more than the head's side
// of a submit.
//
//   submit_client PORT N BODY     (the API token in AG_TOKEN; plain HTTP on 127.0.0.1)
//
// Prints a line of JSON ({"start": S, "submitted": S}: wall-clock seconds as the first
// request left and as the last answer came), then each job's id on a line of its own.
// Exits 1 (saying why) on the first answer that is not a 2xx or a connection failure.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

double wall_clock() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) / 1e9;
}

[[noreturn]] void fail(const std::string& why) {
  std::fprintf(stderr, "submit_client: %s\n", why.c_str());
  std::exit(1);
}

bool write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Reads one response (status line, headers with a Content-Length, body) from `fd`;
// `buffer` keeps what arrived beyond it. Returns the status and sets `body`.
int read_response(int fd, std::string& buffer, std::string& body) {
  char chunk[16384];
  size_t header_end;
  while ((header_end = buffer.find("\r\n\r\n")) == std::string::npos) {
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("the head closed the connection before answering");
    buffer.append(chunk, static_cast<size_t>(n));
  }
  if (buffer.compare(0, 9, "HTTP/1.1 ") != 0) fail("not an HTTP/1.1 answer: " + buffer.substr(0, 40));
  int status = std::atoi(buffer.c_str() + 9);
  long length = -1;
  for (size_t at = buffer.find("\r\n"); at < header_end; at = buffer.find("\r\n", at + 2)) {
    if (strncasecmp(buffer.c_str() + at + 2, "content-length:", 15) == 0) {
      length = std::atol(buffer.c_str() + at + 17);
    }
  }
  if (length < 0) fail("an answer without a Content-Length (status " + std::to_string(status) + ")");
  const size_t end = header_end + 4 + static_cast<size_t>(length);
  while (buffer.size() < end) {
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("the head closed the connection mid-answer");
    buffer.append(chunk, static_cast<size_t>(n));
  }
  body.assign(buffer, header_end + 4, static_cast<size_t>(length));
  buffer.erase(0, end);
  return status;
}

// The value of "job_id" in a submit's answer.
std::string job_id(const std::string& body) {
  size_t key = body.find("\"job_id\"");
  size_t open = key == std::string::npos ? key : body.find('"', body.find(':', key) + 1);
  size_t close = open == std::string::npos ? open : body.find('"', open + 1);
  if (close == std::string::npos) fail("no job_id in the answer: " + body.substr(0, 200));
  return body.substr(open + 1, close - open - 1);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: AG_TOKEN=TOKEN submit_client PORT N BODY\n");
    return 2;
  }
  const int port = std::atoi(argv[1]);
  const long n = std::atol(argv[2]);
  const char* token = std::getenv("AG_TOKEN");
  if (port <= 0 || port > 65535) fail(std::string("PORT must be a TCP port, not '") + argv[1] + "'");
  if (n <= 0) fail(std::string("N must be a positive number of jobs, not '") + argv[2] + "'");
  if (token == nullptr || *token == '\0') fail("set AG_TOKEN to the head's API token");

  const std::string body = argv[3];
  const std::string request =
      "POST /api/jobs HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) + "\r\nAuthorization: Bearer " + token +
      "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;

  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail(std::string("socket: ") + std::strerror(errno));
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sockaddr_in head{};
  head.sin_family = AF_INET;
  head.sin_port = htons(static_cast<uint16_t>(port));
  head.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&head), sizeof head) != 0) {
    fail("connecting to 127.0.0.1:" + std::to_string(port) + ": " + std::strerror(errno));
  }

  std::vector<std::string> ids;
  ids.reserve(static_cast<size_t>(n));
  std::string buffer, answer;
  const double start = wall_clock();
  for (long i = 0; i < n; ++i) {
    if (!write_all(fd, request)) fail(std::string("sending a submit: ") + std::strerror(errno));
    int status = read_response(fd, buffer, answer);
    if (status < 200 || status >= 300) {
      fail("submit " + std::to_string(i + 1) + ": HTTP " + std::to_string(status) + ": " + answer.substr(0, 200));
    }
    ids.push_back(job_id(answer));
  }
  const double submitted = wall_clock();
  close(fd);
  std::printf("{\"start\": %.6f, \"submitted\": %.6f}\n", start, submitted);
  for (const std::string& id : ids) std::printf("%s\n", id.c_str());
  return 0;
}
