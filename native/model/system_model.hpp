// What the user built, as one value: vertices, masses, fixes, elements, colliders. It has
// no behaviour and no caches; System<D> changes it only through its add_* and set_*
// functions, which validate the change and report it to System::changed (the one place
// that invalidates what depends on the model). The state (model/state.hpp) and the
// simulator's settings and caches (system.hpp) live apart from it.
#pragma once

#include <limits>
#include <vector>

#include "contact/contact.hpp"
#include "contact/self_contact.hpp"
#include "forces/stencils.hpp"
#include "model/model.hpp"

namespace ms {

template <int D>
struct Model {
  using VecD = Vec<D>;
  // The connector each vertex became, set once by build_from_arrays (empty otherwise:
  // all masses, then all fixes).
  std::vector<Connector> vertices;
  std::vector<double> mass;
  std::vector<VecD> fix_target;  // where each fix is to be at the end of the next call
  std::vector<Spring> springs;
  std::vector<DistanceConstraint> constraints;
  Stencils stencils;  // the laws on three or more vertices
  Colliders colliders;
  SelfContact self_contact;
  // Sum of the stiffness of the springs at each mass (contact stiffness), kept by add_*.
  std::vector<double> spring_stiffness_at;
  // The bounding box of the masses and fixes where they were added.
  VecD built_lo = VecD::Constant(std::numeric_limits<double>::infinity());
  VecD built_hi = VecD::Constant(-std::numeric_limits<double>::infinity());
  void extend_built_box(const VecD& p) {
    built_lo = built_lo.cwiseMin(p);
    built_hi = built_hi.cwiseMax(p);
  }
};

}  // namespace ms
