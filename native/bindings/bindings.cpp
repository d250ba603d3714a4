// Python bindings (module mass_spring._core). The seed API: MassSpringSystem2d/3d with
// Mass, Fix, Spring, Chain and DistanceConstraint; live element lists; numpy accessors
// and a state checkpoint for big meshes.
#include <limits>
#include <chrono>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <memory>
#include <sstream>

#include "model/build.hpp"
#include "time/integrators.hpp"
#include "linear_solver/krylov.hpp"
#include "forces/laws.hpp"
#include "system.hpp"

namespace py = pybind11;
using namespace ms;

namespace {

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

std::string connector_repr(const Connector& c) {
  return std::string("Connector(") + (c.type == FIX ? "FIX" : "MASS") + ", " +
         std::to_string(c.nr) + ")";
}

py::array_t<double> as_array(const VectorXd& x, py::ssize_t rows, py::ssize_t cols) {
  py::array_t<double> a(cols > 0 ? std::vector<py::ssize_t>{rows, cols}
                                 : std::vector<py::ssize_t>{rows});
  std::copy(x.data(), x.data() + x.size(), a.mutable_data());
  return a;
}

VectorXd from_array(const Arr& a,
                    Eigen::Index expected, const std::string& what) {
  if (a.size() != expected)
    throw InputError(what + ": expected " + std::to_string(expected) + " values, got " +
                     std::to_string(a.size()));
  VectorXd x(expected);
  std::copy(a.data(), a.data() + expected, x.data());
  if (!x.allFinite()) throw InputError(what + ": contains NaN or Inf");
  return x;
}

// Live views into a system: they hold the system alive and read through to its state.
template <int D>
struct MassRef {
  std::shared_ptr<System<D>> sys;
  int i;
};
template <int D>
struct FixRef {
  std::shared_ptr<System<D>> sys;
  int i;
};
template <int D>
struct SpringRef {
  std::shared_ptr<System<D>> sys;
  int i;
  const Spring& get() const { return sys->springs()[i]; }
};
template <int D>
struct ConstraintRef {
  std::shared_ptr<System<D>> sys;
  int i;
};
template <int D, class Ref>
struct ListView {
  std::shared_ptr<System<D>> sys;
  int (*count)(const System<D>&);
};

template <int D, class Ref>
void bind_list(py::module_& m, const std::string& name) {
  using L = ListView<D, Ref>;
  py::class_<L>(m, name.c_str())
      .def("__len__", [](const L& l) { return l.count(*l.sys); })
      .def("__getitem__",
           [](const L& l, int i) {
             const int n = l.count(*l.sys);
             if (i < 0) i += n;
             if (i < 0 || i >= n) throw py::index_error("index out of range");
             return Ref{l.sys, i};
           })
      .def("__iter__", [](const L& l) {
        py::list items;
        for (int i = 0; i < l.count(*l.sys); ++i) items.append(Ref{l.sys, i});
        return py::iter(items);
      });
}

template <int D>
py::dict state_to_dict(const System<D>& s, const State<D>& st) {
  const auto n = static_cast<py::ssize_t>(s.num_masses());
  VectorXd fixes(D * s.num_fixes());
  for (int k = 0; k < s.num_fixes(); ++k) fixes.template segment<D>(D * k) = st.fix_pos[k];
  py::dict d;
  d["dim"] = D;
  d["time"] = st.time;
  d["q"] = as_array(st.q, n, D);
  d["v"] = as_array(st.v, n, D);
  d["acc"] = as_array(st.acc, n, D);
  d["aux"] = as_array(st.aux, n, D);
  d["lam"] = as_array(st.lam, st.lam.size(), 0);
  d["fix_pos"] = as_array(fixes, s.num_fixes(), D);
  d["consistent"] = st.consistent;
  return d;
}

// One entry of a state dict, with a message naming it when it is missing or of the wrong
// type (instead of a KeyError or pybind11's "Unable to cast").
// simulate() without the GIL, checking Python's signals between steps at most every
// 50 ms, so that Ctrl-C stops a long call (KeyboardInterrupt, the state at the last whole
// step: tests/test_core_input.py).
template <int D>
void simulate_interruptibly(System<D>& s, double tend, int steps) {
  using Clock = std::chrono::steady_clock;
  auto next_check = Clock::now();
  auto interrupted = [&next_check]() {
    const auto now = Clock::now();
    if (now < next_check) return false;
    next_check = now + std::chrono::milliseconds(50);
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() == 0) return false;
    PyErr_Clear();  // raised again as KeyboardInterrupt from Interrupted
    return true;
  };
  py::gil_scoped_release release;
  s.simulate(tend, steps, interrupted);
}

template <class T>
T state_field(const py::dict& d, const char* key, const char* expected) {
  if (!d.contains(key)) throw InputError(std::string("state: missing '") + key + "'");
  try {
    return d[key].cast<T>();
  } catch (const std::exception&) {  // pybind11's cast_error, numpy's conversion errors
    throw InputError(std::string("state: '") + key + "' must be " + expected + ", got " +
                     std::string(py::str(py::type::of(d[key]).attr("__name__"))));
  }
}

template <int D>
void state_from_dict(System<D>& s, const py::dict& d) {
  if (state_field<int>(d, "dim", "an integer") != D)
    throw InputError("state: made by a system of another dimension");
  State<D> st;
  const Eigen::Index n = D * s.num_masses();
  const char* array = "an array of numbers";
  st.time = state_field<double>(d, "time", "a number");
  st.q = from_array(state_field<Arr>(d, "q", array), n, "state q");
  st.v = from_array(state_field<Arr>(d, "v", array), n, "state v");
  st.acc = from_array(state_field<Arr>(d, "acc", array), n, "state acc");
  st.aux = from_array(state_field<Arr>(d, "aux", array), n, "state aux");
  st.lam = from_array(state_field<Arr>(d, "lam", array),
                      static_cast<Eigen::Index>(s.constraints().size()), "state lam");
  const VectorXd fixes =
      from_array(state_field<Arr>(d, "fix_pos", array), D * s.num_fixes(), "state fix_pos");
  for (int k = 0; k < s.num_fixes(); ++k) st.fix_pos.push_back(fixes.template segment<D>(D * k));
  st.consistent = state_field<bool>(d, "consistent", "True or False");
  s.set_state(st);
}

template <int D>
py::tuple triplets(const std::vector<Eigen::Triplet<double>>& t) {
  py::array_t<long long> rows(t.size()), cols(t.size());
  py::array_t<double> vals(t.size());
  for (std::size_t k = 0; k < t.size(); ++k) {
    rows.mutable_at(k) = t[k].row();
    cols.mutable_at(k) = t[k].col();
    vals.mutable_at(k) = t[k].value();
  }
  return py::make_tuple(rows, cols, vals);
}

template <class T, class Array>
ArrayView<T> view(const Array& a) {
  return {a.data(), static_cast<std::size_t>(a.size())};
}

// set_colliders(vertices (V, 3), triangles (T, 3), thickness, friction): the last two a
// number or one per triangle.
template <int D>
void set_colliders(System<D>& s, const Arr& vertices, const IdxArr& triangles,
                   const Arr& thickness, const Arr& friction) {
  if (vertices.size() % 3 != 0 || (vertices.ndim() == 2 && vertices.shape(1) != 3))
    throw InputError("set_colliders: vertices must have shape (V, 3)");
  if (triangles.size() % 3 != 0 || (triangles.ndim() == 2 && triangles.shape(1) != 3))
    throw InputError("set_colliders: triangles must have shape (T, 3)");
  std::vector<Vec3> v(static_cast<std::size_t>(vertices.size() / 3));
  for (std::size_t k = 0; k < v.size(); ++k)
    v[k] = Vec3(vertices.data()[3 * k], vertices.data()[3 * k + 1], vertices.data()[3 * k + 2]);
  const std::size_t nt = static_cast<std::size_t>(triangles.size() / 3);
  std::vector<std::array<int, 3>> t(nt);
  for (std::size_t k = 0; k < nt; ++k)
    for (int j = 0; j < 3; ++j) {
      const long long x = triangles.data()[3 * k + j];
      if (x < 0 || x > std::numeric_limits<int>::max())
        throw InputError("set_colliders: triangle " + std::to_string(k) + " uses vertex " +
                         std::to_string(x) + ", but there are " + std::to_string(v.size()));
      t[k][j] = static_cast<int>(x);
    }
  auto per_triangle = [&](const Arr& a, const char* what) {
    if (a.size() != 1 && static_cast<std::size_t>(a.size()) != nt)
      throw InputError(std::string("set_colliders: ") + what +
                       " must be a number or one value per triangle (" + std::to_string(nt) +
                       "), got " + std::to_string(a.size()));
    std::vector<double> out(nt);
    for (std::size_t k = 0; k < nt; ++k) out[k] = a.data()[a.size() == 1 ? 0 : k];
    return out;
  };
  s.set_colliders(v, t, per_triangle(thickness, "thickness"), per_triangle(friction, "friction"));
}

// _collider_queries: Colliders::nearest and Colliders::crosses at many points (tests).
py::tuple collider_queries(const Arr& vertices, const IdxArr& triangles, double thickness,
                           const Arr& points, const Arr& ends) {
  System<3> holder;
  set_colliders(holder, vertices, triangles, Arr(py::float_(thickness)), Arr(py::float_(0.0)));
  if (points.ndim() != 2 || points.shape(1) != 3 || ends.ndim() != 2 || ends.shape(0) != points.shape(0) ||
      ends.shape(1) != 3)
    throw InputError("_collider_queries: points and ends must have the same shape (N, 3)");
  const py::ssize_t n = points.shape(0);
  py::array_t<double> distance(n), normal({n, static_cast<py::ssize_t>(3)});
  py::array_t<bool> crosses(n);
  const Colliders& colliders = holder.colliders();
  for (py::ssize_t k = 0; k < n; ++k) {
    const Vec3 p(points.at(k, 0), points.at(k, 1), points.at(k, 2));
    const Vec3 e(ends.at(k, 0), ends.at(k, 1), ends.at(k, 2));
    const ContactPoint c = colliders.nearest(p, 0.0);
    distance.mutable_at(k) = c.touching ? c.distance : std::numeric_limits<double>::infinity();
    for (int j = 0; j < 3; ++j) normal.mutable_at(k, j) = c.normal(j);
    crosses.mutable_at(k) = colliders.crosses(p, e, 0.0);
  }
  return py::make_tuple(distance, normal, crosses);
}

// mass_spring.from_arrays normalizes the arrays and checks them with vertex- and
// edge-based messages; build_from_arrays checks sizes, indices and values again.
template <int D>
std::shared_ptr<System<D>> system_from_arrays(const Arr& positions, const Arr& masses,
                                              const MaskArr& fixed, const Arr& velocities,
                                              const IdxArr& springs, const Arr& stiffness,
                                              const Arr& rest, const Arr& damping,
                                              const MaskArr& rope, const IdxArr& constraints,
                                              const Arr& clength) {
  MeshArrays arrays;
  arrays.positions = view<double>(positions);
  arrays.masses = view<double>(masses);
  arrays.fixed = view<bool>(fixed);
  arrays.velocities = view<double>(velocities);
  arrays.springs = view<long long>(springs);
  arrays.stiffness = view<double>(stiffness);
  arrays.rest_length = view<double>(rest);
  arrays.damping = view<double>(damping);
  arrays.rope = view<bool>(rope);
  arrays.constraints = view<long long>(constraints);
  arrays.constraint_length = view<double>(clength);
  auto system = std::make_shared<System<D>>();
  build_from_arrays<D>(*system, arrays);
  return system;
}

template <int D>
void bind_system(py::module_& m, const std::string& name) {
  using S = System<D>;
  using SP = std::shared_ptr<S>;
  const std::string suffix = std::to_string(D) + "d";

  py::class_<MassRef<D>>(m, ("MassView" + suffix).c_str())
      .def_property(
          "mass", [](const MassRef<D>& r) { return r.sys->mass(r.i); },
          [](const MassRef<D>& r, double x) { r.sys->set_mass(r.i, x); })
      .def_property(
          "pos", [](const MassRef<D>& r) { return to_tuple<D>(r.sys->pos(r.i)); },
          [](const MassRef<D>& r, const std::vector<double>& x) {
            r.sys->set_pos(r.i, to_vec<D>(x, "Mass " + std::to_string(r.i) + " pos"));
          })
      .def_property(
          "vel", [](const MassRef<D>& r) { return to_tuple<D>(r.sys->vel(r.i)); },
          [](const MassRef<D>& r, const std::vector<double>& x) {
            r.sys->set_vel(r.i, to_vec<D>(x, "Mass " + std::to_string(r.i) + " vel"));
          })
      .def_property_readonly("nr", [](const MassRef<D>& r) { return r.i; })
      .def("__repr__", [](const MassRef<D>& r) {
        std::ostringstream s;
        s << "Mass(" << r.sys->mass(r.i) << ", " << py::str(to_tuple<D>(r.sys->pos(r.i)))
          << ")";
        return s.str();
      });

  py::class_<FixRef<D>>(m, ("FixView" + suffix).c_str())
      .def_property(
          "pos", [](const FixRef<D>& r) { return to_tuple<D>(r.sys->fix_pos(r.i)); },
          [](const FixRef<D>& r, const std::vector<double>& x) {
            r.sys->set_fix_pos(r.i, to_vec<D>(x, "Fix " + std::to_string(r.i) + " pos"));
          },
          "Anchor position. Written between simulate() calls, the fix moves linearly to it "
          "during the next call.")
      .def_property_readonly("nr", [](const FixRef<D>& r) { return r.i; })
      .def("__repr__", [](const FixRef<D>& r) {
        return "Fix(" + std::string(py::str(to_tuple<D>(r.sys->fix_pos(r.i)))) + ")";
      });

  py::class_<SpringRef<D>>(m, ("SpringView" + suffix).c_str())
      .def_property_readonly("length", [](const SpringRef<D>& r) { return r.get().length; })
      .def_property_readonly("stiffness",
                             [](const SpringRef<D>& r) { return r.get().stiffness; })
      .def_property_readonly("damping", [](const SpringRef<D>& r) { return r.get().damping; })
      .def_property_readonly("is_chain", [](const SpringRef<D>& r) { return r.get().rope; })
      .def_property_readonly("connectors",
                             [](const SpringRef<D>& r) {
                               return py::make_tuple(r.get().c[0], r.get().c[1]);
                             })
      .def_property_readonly("c1", [](const SpringRef<D>& r) { return r.get().c[0]; })
      .def_property_readonly("c2", [](const SpringRef<D>& r) { return r.get().c[1]; });

  py::class_<ConstraintRef<D>>(m, ("ConstraintView" + suffix).c_str())
      .def_property_readonly(
          "length", [](const ConstraintRef<D>& r) { return r.sys->constraints()[r.i].length; })
      .def_property_readonly(
          "c1", [](const ConstraintRef<D>& r) { return r.sys->constraints()[r.i].c[0]; })
      .def_property_readonly(
          "c2", [](const ConstraintRef<D>& r) { return r.sys->constraints()[r.i].c[1]; })
      .def_property_readonly(
          "connectors",
          [](const ConstraintRef<D>& r) {
            const auto& c = r.sys->constraints()[r.i];
            return py::make_tuple(c.c[0], c.c[1]);
          })
      .def_property_readonly(
          "force", [](const ConstraintRef<D>& r) { return r.sys->constraint_force(r.i); },
          "Rod tension (positive pulls the ends together) at the current time; before the "
          "first step, solved for at that instant.");

  bind_list<D, MassRef<D>>(m, "MassList" + suffix);
  bind_list<D, FixRef<D>>(m, "FixList" + suffix);
  bind_list<D, SpringRef<D>>(m, "SpringList" + suffix);
  bind_list<D, ConstraintRef<D>>(m, "ConstraintList" + suffix);

  py::class_<S, SP>(m, name.c_str())
      .def(py::init<>())
      .def_property_readonly_static("dim", [](py::object) { return D; })
      .def_property(
          "gravity", [](const S& s) { return to_tuple<D>(s.gravity); },
          [](S& s, const std::vector<double>& g) {
            s.gravity = to_vec<D>(g, "gravity");
            if (!s.gravity.allFinite()) throw InputError("gravity contains NaN or Inf");
            // 1e6 m/s^2 (1e5 g): beyond it a step's round-off swamps any motion.
            if (s.gravity.norm() > 1e6)
              throw InputError("gravity beyond 1e6 m/s^2 (got " + std::to_string(s.gravity.norm()) +
                               "): use metres and seconds");
          })
      // -- building
      .def("add",
           [](S& s, const MassSpec& x) {
             return s.add_mass(x.mass, to_vec<D>(x.pos, "Mass pos"),
                               x.vel.empty() ? Vec<D>::Zero() : to_vec<D>(x.vel, "Mass vel"));
           })
      .def("add", [](S& s, const FixSpec& x) { return s.add_fix(to_vec<D>(x.pos, "Fix pos")); })
      .def("add", [](S& s, const Spring& x) { return s.add_spring(x); })
      .def("add", [](S& s, const ChainSpec& x) { return s.add_spring(x.spring); })
      .def("add", [](S& s, const DistanceConstraint& x) { return s.add_constraint(x); })
      .def("addDistanceConstraint",
           [](S& s, const DistanceConstraint& x) { return s.add_constraint(x); })
      // -- live lists
      .def_property_readonly("masses",
                             [](const SP& s) {
                               return ListView<D, MassRef<D>>{
                                   s, [](const S& x) { return x.num_masses(); }};
                             })
      .def_property_readonly("fixes",
                             [](const SP& s) {
                               return ListView<D, FixRef<D>>{
                                   s, [](const S& x) { return x.num_fixes(); }};
                             })
      .def_property_readonly("springs",
                             [](const SP& s) {
                               return ListView<D, SpringRef<D>>{s, [](const S& x) {
                                 return static_cast<int>(x.springs().size());
                               }};
                             })
      .def_property_readonly("constraints",
                             [](const SP& s) {
                               return ListView<D, ConstraintRef<D>>{s, [](const S& x) {
                                 return static_cast<int>(x.constraints().size());
                               }};
                             })
      // -- integration
      .def("simulate", &simulate_interruptibly<D>, py::arg("tend"), py::arg("steps"),
           "Advance by tend seconds in `steps` equal steps, continuing from the current state.")
      .def(
          "set_integrator",
          [](S& s, const std::string& name, py::object rho_inf) {
            s.integrator = integrator_from_name(name);
            if (!rho_inf.is_none()) {
              const double r = rho_inf.cast<double>();
              if (!(r >= 0 && r <= 1))
                throw InputError("rho_inf must lie in [0, 1], got " + std::to_string(r));
              s.rho_inf = r;
            }
          },
          py::arg("name"), py::arg("rho_inf") = py::none())
      .def_property(
          "integrator", [](const S& s) { return integrator_name(s.integrator); },
          [](S& s, const std::string& name) { s.integrator = integrator_from_name(name); })
      .def_property(
          "rho_inf", [](const S& s) { return s.rho_inf; },
          [](S& s, double r) {
            if (!(r >= 0 && r <= 1))
              throw InputError("rho_inf must lie in [0, 1], got " + std::to_string(r));
            s.rho_inf = r;
          })
      .def_property(
          "newton_tol", [](const S& s) { return s.newton_tol; },
          [](S& s, double t) {
            if (!(t > 0 && t < 1)) throw InputError("newton_tol must lie in (0, 1)");
            s.newton_tol = t;
          })
      .def_property(
          "max_newton_iterations", [](const S& s) { return s.max_newton_iterations; },
          [](S& s, int n) {
            if (n < 1) throw InputError("max_newton_iterations must be >= 1");
            s.max_newton_iterations = n;
          })
      .def_readonly("last_local_error", &S::last_local_error,
                    "Local position error estimate of the last implicit step (RMS over the "
                    "masses' coordinates, length units)")
      .def_property(
          "tolerance", [](const S& s) { return s.tolerance; },
          [](S& s, double t) {
            if (!(std::isfinite(t) && t >= 0 && t < 1))
              throw InputError("tolerance must lie in [0, 1) (0: fixed steps), got " +
                               std::to_string(t));
            // Below 1e-9 of an edge the error estimate is round-off: steps would shrink
            // without end (found by tests/fuzz_bake.py: a bake that never finished).
            if (t > 0 && t < 1e-9) {
              std::ostringstream got;
              got << t;
              throw InputError("tolerance must be 0 (fixed steps) or at least 1e-9, got " +
                               got.str());
            }
            s.set_tolerance(t);
          },
          "Error control: 0 (the default) takes the steps simulate() is given; > 0 takes "
          "steps up to tend/steps sized so the local error stays within tolerance x "
          "error_scale")
      .def_property_readonly(
          "error_scale", [](S& s) { return s.error_scale(); },
          "The length error control's tolerance is a fraction of: the mean length of the "
          "springs and rods (the extent of the masses if there are none), but no less than "
          "1/40 of the largest side of the structure as built, so that meshes divided more "
          "finely than 40 edges across keep the same error allowance in scene units")
      .def_property(
          "max_halvings", [](const S& s) { return s.max_halvings; },
          [](S& s, int n) {
            // Each halving recurses once and halves h: beyond 60 the step is below a
            // double's resolution of any time, and deep recursion would exhaust the stack.
            if (n < 0 || n > 60) throw InputError("max_halvings must lie in [0, 60]");
            s.max_halvings = n;
          })
      .def_property(
          "_newton_matrix",
          [](const S& s) {
            using M = typename S::NewtonMatrix;
            return s.newton_matrix == M::Exact ? "exact" : s.newton_matrix == M::OnDemand ? "on_demand" : "projected";
          },
          [](S& s, const std::string& name) {
            using M = typename S::NewtonMatrix;
            if (name == "projected") s.newton_matrix = M::Projected;
            else if (name == "exact") s.newton_matrix = M::Exact;
            else if (name == "on_demand") s.newton_matrix = M::OnDemand;
            else throw InputError("_newton_matrix must be 'projected', 'exact' or 'on_demand', got '" + name + "'");
          },
          "Hidden, for the step-solve measurements (scripts/bench_step_solve.py): Newton's "
          "matrix in implicit steps.")
      .def_property_readonly("time", &S::time)
      // -- arrays
      .def_property(
          "positions",
          [](const S& s) { return as_array(s.state().q, s.num_masses(), D); },
          [](S& s, const Arr& a) {
            const VectorXd x = from_array(a, D * s.num_masses(), "positions");
            for (int i = 0; i < s.num_masses(); ++i) s.set_pos(i, x.template segment<D>(D * i));
          })
      .def_property(
          "velocities",
          [](const S& s) { return as_array(s.state().v, s.num_masses(), D); },
          [](S& s, const Arr& a) {
            const VectorXd x = from_array(a, D * s.num_masses(), "velocities");
            for (int i = 0; i < s.num_masses(); ++i) s.set_vel(i, x.template segment<D>(D * i));
          })
      .def_property(
          "fix_positions",
          [](const S& s) {
            VectorXd x(D * s.num_fixes());
            for (int k = 0; k < s.num_fixes(); ++k) x.template segment<D>(D * k) = s.fix_pos(k);
            return as_array(x, s.num_fixes(), D);
          },
          [](S& s, const Arr& a) {
            const VectorXd x = from_array(a, D * s.num_fixes(), "fix_positions");
            for (int k = 0; k < s.num_fixes(); ++k)
              s.set_fix_pos(k, x.template segment<D>(D * k));
          })
      .def("vertex_positions",
           [](const S& s) {
             const int n = s.num_vertices();
             VectorXd x(D * n);
             for (int i = 0; i < n; ++i) x.template segment<D>(D * i) = s.vertex_pos(i);
             return as_array(x, n, D);
           },
           "Positions of all vertices (masses and fixes) in vertex order, shape (N, D).")
      .def("vertex_velocities",
           [](const S& s) {
             const int n = s.num_vertices();
             VectorXd x = VectorXd::Zero(D * n);
             for (int i = 0; i < n; ++i) {
               const Connector c = s.vertex(i);
               if (c.type == MASS) x.template segment<D>(D * i) = s.vel(c.nr);
             }
             return as_array(x, n, D);
           },
           "Velocities of all vertices in vertex order (zero for fixes), shape (N, D).")
      .def_property_readonly("fixed_vertices",
                             [](const S& s) {
                               std::vector<long long> idx;
                               const auto& vertices = s.vertices_from_arrays();
                               for (std::size_t i = 0; i < vertices.size(); ++i)
                                 if (vertices[i].type == FIX) idx.push_back(i);
                               return py::array_t<long long>(idx.size(), idx.data());
                             })
      .def_property_readonly("mass_vertices",
                             [](const S& s) {
                               std::vector<long long> idx;
                               const auto& vertices = s.vertices_from_arrays();
                               for (std::size_t i = 0; i < vertices.size(); ++i)
                                 if (vertices[i].type == MASS) idx.push_back(i);
                               return py::array_t<long long>(idx.size(), idx.data());
                             })
      .def_static("_build_from_arrays", &system_from_arrays<D>)
      // -- checkpoint
      .def("get_state", [](const S& s) { return state_to_dict(s, s.state()); },
           "The state: a dict of numpy arrays and floats, everything set_state needs to "
           "continue from here. Reading it changes nothing.")
      .def("checkpoint", [](S& s) { return state_to_dict(s, s.checkpoint()); },
           "get_state() as a restart point: also restarts the linear solver's reuse of its "
           "factor, so that continuing from here and from set_state(checkpoint) into any "
           "identical system give bit-identical runs.")
      .def("set_state", &state_from_dict<D>, py::arg("state"))
      // -- diagnostics
      .def("kinetic_energy", &S::kinetic_energy)
      .def("potential_energy", &S::potential_energy)
      .def("energy", &S::total_energy)
      .def("max_constraint_violation", &S::max_constraint_violation)
      .def_property_readonly("constraint_forces",
                             [](S& s) {
                               const VectorXd f = s.constraint_forces();
                               return as_array(f, f.size(), 0);
                             })
      .def("set_colliders", &set_colliders<D>, py::arg("vertices"), py::arg("triangles"),
           py::arg("thickness") = 0.02, py::arg("friction") = 0.3,
           "Triangles the masses rest on and cannot pass (3-D only): vertices (V, 3), "
           "triangles (T, 3) indices, thickness (m, the distance masses keep from the "
           "surface, on both sides) and Coulomb friction coefficient, each a number or one "
           "per triangle. Set again with the same triangles, the colliders move from where "
           "they are to the new vertices during the next simulate() call. No "
           "self-collision.")
      .def("clear_colliders",
           [](S& s) { s.set_colliders({}, {}, {}, {}); })
      .def_property_readonly("num_collider_triangles",
                             [](const S& s) { return s.colliders().num_triangles(); })
      .def("contact_forces",
           [](const S& s) {
             const VectorXd f = s.contact_forces();
             return as_array(f, s.num_masses(), D);
           },
           "Force of the colliders on each mass now, shape (masses, D): penalty, damping "
           "and friction.")
      .def_readonly("last_newton_iterations", &S::last_newton_iterations)
      .def_property("linear_solver", &S::linear_solver, &S::set_linear_solver,
                    "Preconditioner of Newton's linear systems: 'auto' (default: multigrid "
                    "for systems of 4000 masses or more without DistanceConstraints), "
                    "'direct' (sparse LDL^T factor) or 'multigrid' (smoothed aggregation; "
                    "without DistanceConstraints).")
      .def_property_readonly("stats",
                             [](const S& s) {
                               py::dict d;
                               d["steps"] = s.total_steps;
                               d["halved_steps"] = s.halved_steps;
                               d["rejected_steps"] = s.rejected_steps;
                               d["newton_iterations"] = s.newton_iterations;
                               d["factorizations"] = s.newton_solver().factorizations;
                               d["multigrid_regroupings"] = s.newton_solver().regroupings;
                               d["krylov_iterations"] = s.newton_solver().krylov_iterations;
                               d["lu_fallbacks"] = s.newton_solver().lu_fallbacks;
                               d["regularized_solves"] = s.newton_solver().regularized_solves;
                               d["factor_seconds"] = s.newton_solver().factor_seconds;
                               d["solve_seconds"] = s.newton_solver().solve_seconds;
                               d["multigrid"] = s.newton_solver().multigrid();
                               d["multigrid_levels"] = s.newton_solver().hierarchy().level_sizes();
                               d["refresh_cost"] = s.newton_solver().setup_cost_in_cycles();
                               d["multigrid_fallbacks"] = s.newton_solver().multigrid_fallbacks;
                               return d;
                             })
      .def_property_readonly("num_unknowns", &S::num_unknowns)
      .def(
          "evaluate",
          [](const S& s, const Arr& q, const Arr& v, const Arr& lam) {
            VectorXd F, g;
            const Eigen::Index n = D * s.num_masses();
            s.evaluate(from_array(q, n, "q"), from_array(v, n, "v"),
                       from_array(lam, static_cast<Eigen::Index>(s.constraints().size()), "lam"),
                       F, g);
            return py::make_tuple(as_array(F, F.size(), 0), as_array(g, g.size(), 0));
          },
          "F = f(q, v) - G^T lam and the constraint values g(q) (squared form).")
      .def(
          "precondition",
          [](S& s, const Arr& b, bool rebuild, bool keep_aggregates) {
            const VectorXd x =
                s.precondition(from_array(b, s.num_unknowns(), "b"), rebuild, keep_aggregates);
            return as_array(x, x.size(), 0);
          },
          py::arg("b"), py::arg("rebuild") = true, py::arg("keep_aggregates") = false,
          "One application of the Newton solver's preconditioner (LDL^T factor or multigrid "
          "V-cycle) to b, rebuilt from the last Newton matrix (keep_aggregates: the multigrid "
          "on the aggregates and prolongators it has), or with rebuild=False only the multigrid's "
          "finest smoother renewed from it. For tests and diagnostics.")
      .def(
          "jacobian",
          [](const S& s, const Arr& q, const Arr& v, const Arr& lam) {
            std::vector<Eigen::Triplet<double>> a, b;
            const Eigen::Index n = D * s.num_masses();
            s.jacobian(from_array(q, n, "q"), from_array(v, n, "v"),
                       from_array(lam, static_cast<Eigen::Index>(s.constraints().size()), "lam"),
                       a, b);
            return py::make_tuple(triplets<D>(a), triplets<D>(b));
          },
          "Exact derivatives as COO triplets: d(F, g)/d(q, lam) and dF/dv.")
      .def("__repr__", [name](const S& s) {
        return name + "(" + std::to_string(s.num_masses()) + " masses, " +
               std::to_string(s.num_fixes()) + " fixes, " + std::to_string(s.springs().size()) +
               " springs, " + std::to_string(s.constraints().size()) + " constraints, t=" +
               std::to_string(s.time()) + ")";
      });
}

// ---- the force laws alone (mass_spring._core.laws, for tests)

py::array_t<double> matrix_array(const double* data, int rows, int cols) {
  py::array_t<double> a({rows, cols});
  // Eigen is column-major, numpy row-major.
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) a.mutable_at(r, c) = data[r + rows * c];
  return a;
}

template <int D>
py::tuple element_force_tuple(const ElementForce<D>& e) {
  return py::make_tuple(as_array(e.f, D, 0), matrix_array(e.A.data(), D, D),
                        matrix_array(e.B.data(), D, D));
}

template <class F2, class F3>
auto by_dimension(const Arr& d, F2 f2, F3 f3) {
  if (d.size() == 2) return f2(Vec<2>(Eigen::Map<const Vec<2>>(d.data())));
  if (d.size() == 3) return f3(Vec<3>(Eigen::Map<const Vec<3>>(d.data())));
  throw InputError("d must have 2 or 3 coordinates, got " + std::to_string(d.size()));
}

void bind_laws(py::module_& m) {
  m.doc() = "The elements' force laws as pure functions (see native/laws.hpp).";
  m.def(
      "spring_force",
      [](double length, double stiffness, double damping, bool rope, const Arr& d,
         const Arr& dv, bool definite) {
        const Spring s{length, stiffness, damping, rope, {}};
        if (dv.size() != d.size()) throw InputError("d and dv must have the same size");
        return by_dimension(
            d,
            [&](const Vec<2>& x) {
              return element_force_tuple<2>(
                  spring_force<2>(s, x, Eigen::Map<const Vec<2>>(dv.data()), definite));
            },
            [&](const Vec<3>& x) {
              return element_force_tuple<3>(
                  spring_force<3>(s, x, Eigen::Map<const Vec<3>>(dv.data()), definite));
            });
      },
      py::arg("length"), py::arg("stiffness"), py::arg("damping"), py::arg("rope"), py::arg("d"),
      py::arg("dv"), py::arg("definite") = false,
      "Force f on end a of a spring (rope: tension only) with d = p_b - p_a, dv = v_b - v_a, "
      "and A = df/dd, B = df/ddv: (f, A, B).");
  m.def(
      "spring_energy",
      [](double length, double stiffness, bool rope, double stretch) {
        return spring_energy(Spring{length, stiffness, 0.0, rope, {}}, stretch);
      },
      py::arg("length"), py::arg("stiffness"), py::arg("rope"), py::arg("stretch"));
  m.def("rope_band", &rope_band, py::arg("length"));
  m.def(
      "rod_terms",
      [](double length, const Arr& d, double lam, bool definite) {
        return by_dimension(
            d,
            [&](const Vec<2>& x) {
              const RodTerms<2> r = rod_terms<2>(length, x, lam, definite);
              return py::make_tuple(r.g, as_array(r.grad, 2, 0), element_force_tuple<2>(r.force));
            },
            [&](const Vec<3>& x) {
              const RodTerms<3> r = rod_terms<3>(length, x, lam, definite);
              return py::make_tuple(r.g, as_array(r.grad, 3, 0), element_force_tuple<3>(r.force));
            });
      },
      py::arg("length"), py::arg("d"), py::arg("lam"), py::arg("definite") = false,
      "Rod in squared form: (g, dg/dp_b, (f, A, B)) with f = lam dg/dp_b on end a.");
}

// The integrator table (integrators.hpp) as tuples (name, label, description, explicit,
// order).
py::tuple integrator_table() {
  py::tuple rows(kIntegrators.size());
  for (std::size_t k = 0; k < kIntegrators.size(); ++k) {
    const IntegratorInfo& i = kIntegrators[k];
    rows[k] = py::make_tuple(i.name, i.label, i.description, i.is_explicit, i.order);
  }
  return rows;
}

std::array<Connector, 2> pair_of(const py::sequence& c, const char* what) {
  if (py::len(c) != 2)
    throw InputError(std::string(what) + ": connectors must be a pair (a, b)");
  try {
    return {c[0].cast<Connector>(), c[1].cast<Connector>()};
  } catch (const py::cast_error&) {
    // e.g. Spring(1, 1, [0, 1]): vertex numbers where connectors belong
    throw InputError(std::string(what) +
                     ": connectors must be the pair returned by add(Mass(...)) / add(Fix(...)), "
                     "got " + std::string(py::str(py::type::of(c[0]).attr("__name__"))) +
                     " and " + std::string(py::str(py::type::of(c[1]).attr("__name__"))));
  }
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "Compiled core of mass_spring: sparse generalized-alpha DAE integrator.";

  static py::exception<SimulationError> simulation_error(m, "SimulationError",
                                                         PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const InputError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const SimulationError& e) {
      py::set_error(simulation_error, e.what());
    } catch (const Interrupted& e) {
      PyErr_SetString(PyExc_KeyboardInterrupt, e.what());
    }
  });

  m.attr("FIX") = static_cast<int>(FIX);
  m.attr("MASS") = static_cast<int>(MASS);
  m.def(
      "set_num_threads",
      [](int n) {
        // Beyond this a typo, not a machine: each worker is a thread of the process.
        constexpr int kMostThreads = 1024;
        if (n < 1 || n > kMostThreads)
          throw InputError("set_num_threads: n must lie in [1, " + std::to_string(kMostThreads) +
                           "] (the workers, the calling thread included), got " + std::to_string(n));
        py::gil_scoped_release free;  // waits for a loop another thread runs
        ms::WorkerPool::shared().set_num_threads(n);
      },
      py::arg("n"),
      "Run big systems' loops on n workers, the calling thread included (default: the cores "
      "this process may use, or MASS_SPRING_NUM_THREADS). The numbers are the same for any n.");
  m.def("get_num_threads", [] { return ms::WorkerPool::shared().num_threads(); },
        "The workers big systems' loops run on (set_num_threads).");
  m.def("usable_cores", &ms::WorkerPool::usable_cores,
        "The cores this process may run on (its CPU affinity), the default number of workers.");
  m.def("_collider_queries", &collider_queries, py::arg("vertices"), py::arg("triangles"),
        py::arg("thickness"), py::arg("points"), py::arg("ends"),
        "For tests of the colliders' box tree against brute force: for each point, the "
        "distance to the nearest collider triangle within the thickness (inf: none) and the "
        "normal there, and whether the segment from the point to `ends` crosses a triangle.");
  m.attr("SPLIT_MIN_MASSES") = System<3>::kSplitMinMasses;
  m.attr("SPLIT_MIN_VECTOR_LENGTH") = 2 * ms::kVectorGrain;  // two chunks from here on
  m.attr("MULTIGRID_MIN_MASSES") = System<3>::kMultigridMinMasses;
  m.attr("MULTIGRID_MIN_MASSES_CONTROLLED") = System<3>::kMultigridMinMassesControlled;
  m.attr("INTEGRATOR_TABLE") = integrator_table();
  py::module_ laws = m.def_submodule("laws");
  bind_laws(laws);

  py::class_<Connector>(m, "Connector")
      .def(py::init([](int type, int nr) {
             if (type != FIX && type != MASS)
               throw InputError("Connector type must be FIX (1) or MASS (2)");
             return Connector{type, nr, 0};
           }),
           py::arg("type"), py::arg("nr"))
      .def_readonly("type", &Connector::type)
      .def_readonly("nr", &Connector::nr)
      .def_property_readonly_static("FIX", [](py::object) { return static_cast<int>(FIX); })
      .def_property_readonly_static("MASS", [](py::object) { return static_cast<int>(MASS); })
      .def("__eq__",
           [](const Connector& a, const Connector& b) {
             return a.type == b.type && a.nr == b.nr && a.owner == b.owner;
           })
      .def("__hash__", [](const Connector& c) { return py::hash(py::make_tuple(c.type, c.nr)); })
      .def("__repr__", &connector_repr);

  py::class_<MassSpec>(m, "Mass")
      .def(py::init([](double mass, std::vector<double> pos, py::object vel) {
             MassSpec s{mass, std::move(pos), {}};
             if (!(std::isfinite(mass) && mass > 0))
               throw InputError("Mass: mass must be positive, got " + std::to_string(mass));
             if (!vel.is_none()) s.vel = vel.cast<std::vector<double>>();
             return s;
           }),
           py::arg("mass"), py::arg("pos"), py::arg("vel") = py::none())
      .def_readwrite("mass", &MassSpec::mass)
      .def_readwrite("pos", &MassSpec::pos)
      .def_readwrite("vel", &MassSpec::vel);

  py::class_<FixSpec>(m, "Fix")
      .def(py::init([](std::vector<double> pos) { return FixSpec{std::move(pos)}; }),
           py::arg("pos"))
      .def_readwrite("pos", &FixSpec::pos);

  auto make_spring = [](double length, double stiffness, const py::sequence& c, double damping,
                        bool rope) {
    Spring s;
    s.length = length;
    s.stiffness = stiffness;
    s.damping = damping;
    s.rope = rope;
    s.c = pair_of(c, rope ? "Chain" : "Spring");
    return s;
  };
  py::class_<Spring>(m, "Spring")
      .def(py::init([make_spring](double length, double stiffness, const py::sequence& c,
                                  double damping) {
             return make_spring(length, stiffness, c, damping, false);
           }),
           py::arg("length"), py::arg("stiffness"), py::arg("connectors"),
           py::arg("damping") = 0.0)
      .def_readonly("length", &Spring::length)
      .def_readonly("stiffness", &Spring::stiffness)
      .def_readonly("damping", &Spring::damping)
      .def_property_readonly("connectors",
                             [](const Spring& s) { return py::make_tuple(s.c[0], s.c[1]); });

  py::class_<ChainSpec>(m, "Chain", "A rope link: pulls when stretched, slack when compressed.")
      .def(py::init([make_spring](double length, double stiffness, const py::sequence& c,
                                  double damping) {
             return ChainSpec{make_spring(length, stiffness, c, damping, true)};
           }),
           py::arg("length"), py::arg("stiffness"), py::arg("connectors"),
           py::arg("damping") = 0.0)
      .def_property_readonly("length", [](const ChainSpec& s) { return s.spring.length; })
      .def_property_readonly("stiffness", [](const ChainSpec& s) { return s.spring.stiffness; });

  py::class_<DistanceConstraint>(m, "DistanceConstraint")
      .def(py::init([](double length, const py::sequence& c) {
             return DistanceConstraint{length, pair_of(c, "DistanceConstraint")};
           }),
           py::arg("length"), py::arg("connectors"))
      .def(py::init([](const Connector& a, const Connector& b, double length) {
             return DistanceConstraint{length, {a, b}};
           }),
           py::arg("c1"), py::arg("c2"), py::arg("length"))
      .def_readonly("length", &DistanceConstraint::length)
      .def_property_readonly("c1", [](const DistanceConstraint& d) { return d.c[0]; })
      .def_property_readonly("c2", [](const DistanceConstraint& d) { return d.c[1]; });

  bind_system<2>(m, "MassSpringSystem2d");
  bind_system<3>(m, "MassSpringSystem3d");
}
