// Simulation: simulate(), the integrator and its settings, error control, statistics, and
// the evaluations tests read (forces, Jacobian, preconditioner).
#include "bindings/common.hpp"

#include <chrono>
#include <sstream>

#include "time/integrators.hpp"

namespace ms::bindings {

namespace {

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

}  // namespace

template <int D>
void bind_simulation(SystemClass<D>& cls) {
  using S = System<D>;
  cls
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
      .def_property_readonly("time", &S::time);
  cls
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
                               d["self_contact_pairs"] = s.self_contact_pairs();
                               d["self_contact_refusals"] = s.self_contact_refusals;
                               d["self_contact_relistings"] = s.self_contact_relistings;
                               d["self_contact_listings"] = s.self_contact_listings;
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
          "Exact derivatives as COO triplets: d(F, g)/d(q, lam) and dF/dv.");
}

template void bind_simulation<2>(SystemClass<2>&);
template void bind_simulation<3>(SystemClass<3>&);

}  // namespace ms::bindings
