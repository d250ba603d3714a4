// What the binding files share: array conversions with messages that name the value,
// the element descriptors as the user writes them, and the System class they all extend.
#pragma once

#include <limits>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "system.hpp"

namespace ms::bindings {

namespace py = pybind11;

using Arr = py::array_t<double, py::array::c_style | py::array::forcecast>;
using IdxArr = py::array_t<long long, py::array::c_style | py::array::forcecast>;
using MaskArr = py::array_t<bool, py::array::c_style | py::array::forcecast>;

// Element descriptors as the user writes them, before they join a system (dimension free).
struct MassSpec {
  double mass;
  std::vector<double> pos, vel;
};
struct FixSpec {
  std::vector<double> pos;
};
struct ChainSpec {
  Spring spring;
};
// A wire's bending at its middle vertex (forces/wire_bending.hpp).
struct WireBendingSpec {
  WireBending law;
  std::array<Connector, 3> ends;
};
// A sheet's bending across an edge (forces/hinge_bending.hpp); without a rest angle
// (NaN), the angle where the vertices are when it is added.
struct HingeBendingSpec {
  HingeBending law;
  std::array<Connector, 4> ends;
};

template <int D>
Vec<D> to_vec(const std::vector<double>& x, const std::string& what) {
  if (static_cast<int>(x.size()) != D)
    throw InputError(what + " must have " + std::to_string(D) + " coordinates, got " +
                     std::to_string(x.size()));
  Vec<D> v;
  for (int k = 0; k < D; ++k) v(k) = x[k];
  return v;
}

template <int D>
py::tuple to_tuple(const Vec<D>& v) {
  py::tuple t(D);
  for (int k = 0; k < D; ++k) t[k] = v(k);
  return t;
}

std::string connector_repr(const Connector& c);
py::array_t<double> as_array(const VectorXd& x, py::ssize_t rows, py::ssize_t cols);
// `a` as a vector of `expected` finite values; the message names `what`.
VectorXd from_array(const Arr& a, Eigen::Index expected, const std::string& what);

template <int D>
using SystemClass = py::class_<System<D>, std::shared_ptr<System<D>>>;

// One function per concept, each defined in its own file for D = 2 and 3.
void bind_elements(py::module_& m);  // seed_api.cpp: Connector, Mass, Fix, Spring, ...
template <int D>
void bind_seed_api(py::module_& m, SystemClass<D>& cls, const std::string& name);  // seed_api.cpp
template <int D>
void bind_arrays(SystemClass<D>& cls);  // arrays.cpp: numpy accessors, from_arrays, state
template <int D>
void bind_simulation(SystemClass<D>& cls);  // simulation.cpp: integrators, settings, stats
// Rows of K vertex indices, (n, K) (any n for an empty array); an index beyond int is -1
// (the caller's check names it).
template <int K>
std::vector<std::array<int, K>> index_rows(const IdxArr& rows, const char* what) {
  const bool shaped = rows.ndim() == 2 ? rows.shape(1) == K : rows.size() == 0;
  if (!shaped)
    throw InputError(std::string(what) + ": expected an array of shape (n, " + std::to_string(K) +
                     ") of vertex indices");
  std::vector<std::array<int, K>> out(static_cast<std::size_t>(rows.size()) / K);
  for (std::size_t r = 0; r < out.size(); ++r)
    for (int k = 0; k < K; ++k) {
      const long long i = rows.data()[K * r + k];
      out[r][k] = i < 0 || i > std::numeric_limits<int>::max() ? -1 : static_cast<int>(i);
    }
  return out;
}

template <int D>
void bind_colliders(SystemClass<D>& cls);  // colliders.cpp
void bind_collider_queries(py::module_& m);  // colliders.cpp, for tests
void bind_laws(py::module_& m);  // laws.cpp: the force laws alone, for tests
void bind_step(py::module_& m);  // step.cpp: the pure pieces of a time step, for tests
void bind_parallel(py::module_& m);  // module.cpp: the workers

}  // namespace ms::bindings
