// The state of a mass-spring system: everything needed to continue a run exactly, and
// the path of the fixes during one simulate() call.
#pragma once

#include <Eigen/Core>
#include <vector>

#include "model/model.hpp"

namespace ms {

using Eigen::VectorXd;

// Everything needed to continue a run exactly.
template <int D>
struct State {
  double time = 0.0;
  VectorXd q, v;    // positions and velocities of the masses
  VectorXd acc;     // true acceleration q''
  VectorXd aux;     // generalized-alpha auxiliary (pseudo-)acceleration
  VectorXd lam;     // constraint multipliers
  std::vector<Vec<D>> fix_pos;  // where the fixes are at `time`
  bool consistent = false;      // acc and lam solve the equations at `time`
};

// Linear pin motion during one simulate() call: from where the fixes are at its start
// to where the user put them for its end.
template <int D>
struct FixPath {
  double t0 = 0.0, duration = 1.0;
  const std::vector<Vec<D>>* start = nullptr;
  const std::vector<Vec<D>>* target = nullptr;
  bool moving = false;

  Vec<D> pos(int k, double t) const {
    if (!moving) return (*target)[k];
    double s = (t - t0) / duration;
    return (*start)[k] + s * ((*target)[k] - (*start)[k]);
  }
  Vec<D> vel(int k) const {
    if (!moving) return Vec<D>::Zero();
    return ((*target)[k] - (*start)[k]) / duration;
  }
};

}  // namespace ms
