// Expansion of $VAR and ${VAR} in runtime_env values against a task's environment.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace ag {

// Replaces $NAME and ${NAME} in `value` with env[NAME] (empty when unset). "$$" is a
// literal "$"; a "$" followed by anything else stays as it is.
// Stops once the result would pass `max_bytes` and returns nullopt: a short value can
// name a long variable many times.
std::optional<std::string> expand_env_vars(const std::string& value, const std::map<std::string, std::string>& env,
                                           size_t max_bytes = SIZE_MAX);

}  // namespace ag
