// The checks on a `--store postgresql://...` URL that `ag start-head` and
// `ag admin copy-store` share.
#pragma once

#include <string>

namespace ag::cli {

// What is wrong with `url` as a --store (in the flag's terms), or "" when nothing is: it
// must be a postgresql:// (or postgres://) URL and hold no password, since a command
// line is readable by every user of the machine.
std::string store_url_problem(const std::string& url);

}  // namespace ag::cli
