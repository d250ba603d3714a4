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
// step: tests/test_core_input.py), and `stop()` if given: a signal handler that only
// records the signal (the headless bake's) stops a long frame too
// (tests/test_addon_safety.py, test_a_signal_stops_a_long_frame).
template <int D>
void simulate_interruptibly(System<D>& s, double tend, int steps, const py::object& stop) {
  using Clock = std::chrono::steady_clock;
  auto next_check = Clock::now();
  auto interrupted = [&next_check, &stop]() {
    const auto now = Clock::now();
    if (now < next_check) return false;
    next_check = now + std::chrono::milliseconds(50);
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() == 0) return !stop.is_none() && stop().cast<bool>();
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
      .def("simulate", &simulate_interruptibly<D>, py::arg("tend"), py::arg("steps"), py::arg("stop") = py::none(),
           "Advance by tend seconds in `steps` equal steps, continuing from the current state. "
           "KeyboardInterrupt (the state that of the last whole step) on Ctrl-C, or when "
           "stop() (asked between steps, at most every 50 ms) returns True.")
      .def(
          "set_integrator",
          [](S& s, const std::string& name, py::object rho_inf) {
            s.simulator().integrator = integrator_from_name(name);
            if (!rho_inf.is_none()) s.simulator().set_rho_inf(rho_inf.cast<double>());
          },
          py::arg("name"), py::arg("rho_inf") = py::none())
      .def_property(
          "integrator", [](const S& s) { return integrator_name(s.simulator().integrator); },
          [](S& s, const std::string& name) { s.simulator().integrator = integrator_from_name(name); })
      .def_property(
          "rho_inf", [](const S& s) { return s.simulator().rho_inf; },
          [](S& s, double r) { s.simulator().set_rho_inf(r); })
      .def_property(
          "newton_tol", [](const S& s) { return s.simulator().newton_tol; },
          [](S& s, double t) { s.simulator().set_newton_tol(t); })
      .def_property(
          "max_newton_iterations", [](const S& s) { return s.simulator().max_newton_iterations; },
          [](S& s, int n) { s.simulator().set_max_newton_iterations(n); })
      .def_property_readonly(
          "last_local_error", [](const S& s) { return s.simulator().last_local_error; },
                    "Local position error estimate of the last implicit step (RMS over the "
                    "masses' coordinates, length units)")
      .def_property(
          "tolerance", [](const S& s) { return s.simulator().tolerance; },
          [](S& s, double t) { s.simulator().set_tolerance(t); },
          "Error control: 0 (the default) takes the steps simulate() is given; > 0 takes "
          "steps up to tend/steps sized so the local error stays within tolerance x "
          "error_scale")
      .def_property_readonly(
          "error_scale", [](S& s) { return s.simulator().error_scale(); },
          "The length error control's tolerance is a fraction of: the mean length of the "
          "springs and rods (the extent of the masses if there are none), but no less than "
          "1/40 of the largest side of the structure as built, so that meshes divided more "
          "finely than 40 edges across keep the same error allowance in scene units")
      .def_property(
          "max_halvings", [](const S& s) { return s.simulator().max_halvings; },
          [](S& s, int n) { s.simulator().set_max_halvings(n); })
      .def_property(
          "_newton_matrix",
          [](const S& s) {
            using M = typename Simulator<D>::NewtonMatrix;
            return s.simulator().newton_matrix == M::Exact ? "exact" : s.simulator().newton_matrix == M::OnDemand ? "on_demand" : "projected";
          },
          [](S& s, const std::string& name) {
            using M = typename Simulator<D>::NewtonMatrix;
            if (name == "projected") s.simulator().newton_matrix = M::Projected;
            else if (name == "exact") s.simulator().newton_matrix = M::Exact;
            else if (name == "on_demand") s.simulator().newton_matrix = M::OnDemand;
            else throw InputError("_newton_matrix must be 'projected', 'exact' or 'on_demand', got '" + name + "'");
          },
          "Hidden, for the step-solve measurements (scripts/bench_step_solve.py): Newton's "
          "matrix in implicit steps.")
      .def("_fall_back_to_direct", [](S& s) { s.simulator().fall_back_to_direct(); },
           "Hidden, for tests: what a failed multigrid solve does (LDL^T until the next "
           "checkpoint restored or the next build).")
      .def_property_readonly("time", &S::time);
  cls
      .def_property_readonly("last_newton_iterations",
                             [](const S& s) { return s.simulator().last_newton_iterations; })
      .def_property(
          "linear_solver", [](const S& s) { return s.simulator().linear_solver(); },
          [](S& s, const std::string& name) { s.simulator().set_linear_solver(name); },
                    "Preconditioner of Newton's linear systems: 'auto' (default: multigrid "
                    "for systems of 4000 masses or more without DistanceConstraints), "
                    "'direct' (sparse LDL^T factor) or 'multigrid' (smoothed aggregation; "
                    "without DistanceConstraints).")
      .def_property_readonly("stats",
                             [](const S& s) {
                               py::dict d;
                               d["steps"] = s.simulator().total_steps;
                               d["halved_steps"] = s.simulator().halved_steps;
                               d["rejected_steps"] = s.simulator().rejected_steps;
                               d["energy_rejections"] = s.simulator().energy_rejections;
                               d["newton_iterations"] = s.simulator().newton_iterations;
                               d["matrix_assemblies"] = s.simulator().matrix_assemblies;
                               d["tight_first_corrections"] = s.simulator().tight_first_corrections;
                               d["factorizations"] = s.simulator().newton_solver().factorizations;
                               d["multigrid_regroupings"] = s.simulator().newton_solver().regroupings;
                               d["krylov_iterations"] = s.simulator().newton_solver().krylov_iterations;
                               d["lu_fallbacks"] = s.simulator().newton_solver().lu_fallbacks;
                               d["regularized_solves"] = s.simulator().newton_solver().regularized_solves;
                               d["factor_seconds"] = s.simulator().newton_solver().factor_seconds;
                               d["solve_seconds"] = s.simulator().newton_solver().solve_seconds;
                               d["multigrid"] = s.simulator().newton_solver().multigrid();
                               d["multigrid_levels"] = s.simulator().newton_solver().hierarchy().level_sizes();
                               d["refresh_cost"] = s.simulator().newton_solver().setup_cost_in_cycles();
                               d["multigrid_fallbacks"] = s.simulator().newton_solver().multigrid_fallbacks;
                               d["self_contact_pairs"] = s.simulator().self_contact_pairs();
                               d["self_contact_refusals"] = s.simulator().self_contact_refusals;
                               d["self_contact_relistings"] = s.simulator().self_contact_relistings;
                               d["self_contact_listings"] = s.simulator().self_contact_listings;
                               d["self_contact_evaluations"] = s.simulator().self_contact_evaluations;
                               return d;
                             })
      .def_property_readonly("num_unknowns", &S::num_unknowns)
      .def(
          "evaluate",
          [](const S& s, const Arr& q, const Arr& v, const Arr& lam) {
            s.simulator().require_idle("evaluate its forces");  // the contacts' scratch: see "energy"
            VectorXd F, g;
            const Eigen::Index n = D * s.num_masses();
            s.simulator().evaluate(from_array(q, n, "q"), from_array(v, n, "v"),
                       from_array(lam, static_cast<Eigen::Index>(s.constraints().size()), "lam"),
                       F, g);
            return py::make_tuple(as_array(F, F.size(), 0), as_array(g, g.size(), 0));
          },
          "F = f(q, v) - G^T lam and the constraint values g(q) (squared form).")
      .def(
          "precondition",
          [](S& s, const Arr& b, bool rebuild, bool keep_aggregates) {
            const VectorXd x =
                s.simulator().precondition(from_array(b, s.num_unknowns(), "b"), rebuild, keep_aggregates);
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
            s.simulator().jacobian(from_array(q, n, "q"), from_array(v, n, "v"),
                       from_array(lam, static_cast<Eigen::Index>(s.constraints().size()), "lam"),
                       a, b);
            return py::make_tuple(triplets<D>(a), triplets<D>(b));
          },
          "Exact derivatives as COO triplets: d(F, g)/d(q, lam) and dF/dv.");
}

template void bind_simulation<2>(SystemClass<2>&);
template void bind_simulation<3>(SystemClass<3>&);

}  // namespace ms::bindings
