// What the user built, as one value: vertices, masses, fixes, elements, colliders, gravity.
// It has no caches and no behaviour beyond reading itself; System<D> changes it only
// through its add_* and set_* functions, which validate the change and report it to
// System::changed (the one place that invalidates what depends on the model). The state
// (model/state.hpp) and the simulator (time/simulator.hpp: settings, caches, the time
// integrators and the linear solver) live apart from it.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "contact/contact.hpp"
#include "contact/self_contact.hpp"
#include "forces/stencils.hpp"
#include "model/model.hpp"

namespace ms {

// What a change of the model, the state or the simulator's settings makes stale: a bit
// set of these, given to System::changed.
enum Change : unsigned {
  kTopology = 1u << 0,      // elements or vertices added
  kRods = 1u << 1,          // rods added: check them against the positions
  kMasses = 1u << 2,        // a mass's value
  kPositions = 1u << 3,     // a mass moved by hand
  kVelocities = 1u << 4,    // a mass's velocity set by hand
  kColliders = 1u << 5,     // the colliders
  kSolverChoice = 1u << 6,  // the linear solver, or error control on/off (auto's choice)
  kRestart = 1u << 7,       // checkpoint: the solvers' reuse and the carried step size
  kRestore = 1u << 8,       // set_state: a restart from another run's state
  kSelfContact = 1u << 9,   // the self-contact's parts, distance or friction
};

template <int D>
struct Model {
  using VecD = Vec<D>;
  // The system's identity: its connectors carry it, so that one from another system is
  // refused.
  std::uint64_t id = 0;
  VecD gravity = VecD::Zero();
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

  int num_masses() const { return static_cast<int>(mass.size()); }
  int num_fixes() const { return static_cast<int>(fix_target.size()); }
  // Dimension of the unknown vector (D * masses + constraints).
  int num_unknowns() const { return D * num_masses() + static_cast<int>(constraints.size()); }
  // Vertex order: as built from arrays (build.hpp), else all masses, then all fixes.
  int num_vertices() const {
    return vertices.empty() ? num_masses() + num_fixes() : static_cast<int>(vertices.size());
  }
  Connector vertex(int i) const {
    if (!vertices.empty()) return vertices[i];
    return i < num_masses() ? Connector{MASS, i, id} : Connector{FIX, i - num_masses(), id};
  }
  // A connector as messages name it: "vertex 7" in a system built from arrays (the
  // caller's numbering, e.g. a mesh's), else "mass 3" or "fix 0".
  std::string connector_name(const Connector& c) const {
    for (std::size_t v = 0; v < vertices.size(); ++v)
      if (vertices[v].type == c.type && vertices[v].nr == c.nr) return "vertex " + std::to_string(v);
    return (c.type == FIX ? "fix " : "mass ") + std::to_string(c.nr);
  }
};

}  // namespace ms
