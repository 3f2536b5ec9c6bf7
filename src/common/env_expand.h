// Expansion of $VAR and ${VAR} in runtime_env values against a task's environment.
#pragma once

#include <map>
#include <string>

namespace ag {

// Replaces $NAME and ${NAME} in `value` with env[NAME] (empty when unset). "$$" is a
// literal "$"; a "$" followed by anything else stays as it is.
std::string expand_env_vars(const std::string& value, const std::map<std::string, std::string>& env);

}  // namespace ag
