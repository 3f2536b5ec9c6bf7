#include "cli/store_url.h"

namespace ag::cli {

std::string store_url_problem(const std::string& url) {
  const size_t scheme = url.find("://");
  const std::string scheme_name = scheme == std::string::npos ? "" : url.substr(0, scheme);
  if (scheme_name != "postgresql" && scheme_name != "postgres") {
    return "--store " + url + ": give a PostgreSQL URL, postgresql://USER@HOST:PORT/DATABASE";
  }
  const size_t host_at = scheme + 3;
  const std::string authority = url.substr(host_at, url.find_first_of("/?", host_at) - host_at);
  const size_t at = authority.rfind('@');
  const bool in_userinfo = at != std::string::npos && authority.substr(0, at).find(':') != std::string::npos;
  const size_t query = url.find('?');
  const bool in_query = query != std::string::npos && (url.find("?password=", query) != std::string::npos ||
                                                       url.find("&password=", query) != std::string::npos);
  if (in_userinfo || in_query) {
    return "--store: the URL holds a password, which every user of this machine can read on a command line; put "
           "it in a file of mode 0600 and give --store-password-file FILE (or use PGPASSWORD or ~/.pgpass)";
  }
  return "";
}

}  // namespace ag::cli
