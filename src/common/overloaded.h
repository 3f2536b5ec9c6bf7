// Overloaded{lambdas...}: one visitor from several lambdas, for std::visit over the
// protocol's message variants.
#pragma once

namespace ag {

template <typename... Fns>
struct Overloaded : Fns... {
  using Fns::operator()...;
};
template <typename... Fns>
Overloaded(Fns...) -> Overloaded<Fns...>;

}  // namespace ag
