// Quoting a word for /bin/sh.
#pragma once

#include <string>

namespace ag {

// `arg` as one word of a /bin/sh command line: as it is when it holds only characters
// the shell gives no meaning to, else in single quotes (a ' inside written '\'').
std::string shell_quote(const std::string& arg);

}  // namespace ag
