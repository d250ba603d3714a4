// Topology and parameters of a mass-spring system: value types, no behaviour.
#pragma once

#include <Eigen/Core>
#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace ms {

// Connector types use the numbers of the course's reference code (FIX = 1, MASS = 2),
// because the seeds' scripts compare `c.type == 1`.
enum ConnectorType : int { FIX = 1, MASS = 2 };

struct Connector {
  int type = MASS;
  int nr = 0;
  std::uint64_t owner = 0;  // id of the system that made it; 0 = made by hand
};

template <int D>
using Vec = Eigen::Matrix<double, D, 1>;
template <int D>
using Mat = Eigen::Matrix<double, D, D>;

// An element joining two connectors. Springs (and rope links, which only pull) carry
// stiffness and an optional dashpot along the spring; constraints fix the distance.
struct Spring {
  // As a force law (forces/laws.hpp, law_terms): on two vertices, in the pair form (its
  // forces and Newton block depend on the ends' difference: one D x D block), with the
  // negative stiffness of compression left out of Newton's projected matrix.
  static constexpr int K = 2;
  static constexpr bool kPairForm = true;
  static constexpr bool kProjectInNewton = true;
  static constexpr bool kOuterProjected = false;
  double length = 0.0;
  double stiffness = 0.0;
  double damping = 0.0;
  bool rope = false;  // tension only: slack when shorter than its length
  std::array<Connector, 2> c;
};

struct DistanceConstraint {
  double length = 0.0;
  std::array<Connector, 2> c;
};

// Raised for bad input; bound to Python's ValueError.
struct InputError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// Raised when a step cannot be completed; bound to mass_spring.SimulationError.
struct SimulationError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Raised between steps when simulate()'s `interrupted` check says so (Ctrl-C in Python); bound to
// KeyboardInterrupt. The state is that of the last whole step.
struct Interrupted : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace ms
