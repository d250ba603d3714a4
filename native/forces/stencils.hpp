// Every force law on three or more vertices that a model may hold, one StencilSet each
// (forces/stencil.hpp). A new law is registered here with one line; assembly, the energy
// and the Newton matrix take it from this list.
#pragma once

#include <tuple>

#include "forces/stencil.hpp"
#include "forces/hinge_bending.hpp"
#include "forces/wire_bending.hpp"

namespace ms {

using Stencils = std::tuple<StencilSet<WireBending>, StencilSet<HingeBending>>;

// f(set) for each law's set, in the order above.
template <class Sets, class F>
void for_each_set(Sets& sets, const F& f) {
  std::apply([&](auto&... set) { (f(set), ...); }, sets);
}

}  // namespace ms
