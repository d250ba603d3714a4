// mass_spring._core.step: the pure pieces of a time step alone, for tests
// (tests/test_core_step_pieces.py, tests/test_core_step_size.py): the step-size rules,
// the Newmark family's prediction and error coefficient, the energy test, and Newton's
// tolerances and stop test.
#include "bindings/common.hpp"

#include "time/newmark.hpp"
#include "time/newton.hpp"

namespace ms::bindings {

void bind_step(py::module_& m) {
  m.doc() = "The pure pieces of a time step (native/time/newmark.hpp, newton.hpp), for tests.";
  m.def("within", &step_within, py::arg("h"), py::arg("left"));
  m.def("after_accepted", &step_after_accepted, py::arg("err"), py::arg("h"), py::arg("proposal"),
        py::arg("h_max"));
  m.def("after_rejected", &step_after_rejected, py::arg("h"), py::arg("measured"), py::arg("err"));
  m.def(
      "predict",
      [](const std::string& integrator, double rho_inf, double h, const Arr& q, const Arr& v, const Arr& acc,
         const Arr& aux) {
        const Eigen::Index n = q.size();
        const IntegratorKind kind = integrator_from_name(integrator);
        if (is_explicit(kind)) throw InputError("predict is for the implicit integrators");
        NewmarkStep step = newmark_coefficients(kind, rho_inf, h);
        step.q_pred.resize(n);
        step.v_pred.resize(n);
        step.w.resize(n);
        const VectorXd qs = from_array(q, n, "q"), vs = from_array(v, n, "v");
        const VectorXd as = from_array(acc, n, "acc"), xs = from_array(aux, n, "aux");
        newmark_predict_rows(kind, rho_inf, h, qs, vs, as, xs, 0, n, step);
        return py::make_tuple(as_array(step.q_pred, n, 0), as_array(step.v_pred, n, 0), as_array(step.w, n, 0),
                              step.bq, step.bv, step.c);
      },
      py::arg("integrator"), py::arg("rho_inf"), py::arg("h"), py::arg("q"), py::arg("v"), py::arg("acc"),
      py::arg("aux"),
      "(q_pred, v_pred, w, bq, bv, c): q1 = q_pred + bq acc1, v1 = v_pred + bv acc1, aux1 = c acc1 + w.");
  m.def(
      "local_error_coefficient",
      [](const std::string& integrator, double rho_inf) {
        return local_error_coefficient(integrator_from_name(integrator), rho_inf);
      },
      py::arg("integrator"), py::arg("rho_inf"));
  m.def("energy_kept", &energy_kept, py::arg("energy_before"), py::arg("energy"), py::arg("energy_scale"),
        py::arg("tolerance"), py::arg("ceiling"));
  m.def(
      "newton_tolerances",
      [](double newton_tol, double tolerance, double length_scale, double error_scale, double gravity,
         double acc_max, double bq) {
        const NewtonTolerances t =
            newton_tolerances({newton_tol, tolerance, length_scale, error_scale}, gravity, acc_max, bq);
        return py::make_tuple(t.pos, t.acc, t.close_enough);
      },
      py::arg("newton_tol"), py::arg("tolerance"), py::arg("length_scale"), py::arg("error_scale"),
      py::arg("gravity"), py::arg("acc_max"), py::arg("bq"), "(pos, acc, close_enough)");
  m.def("linear_tolerance", &linear_tolerance, py::arg("error_control"), py::arg("first_correction"),
        py::arg("calm"), "The relative residual Newton's linear solve is asked for (time/newton.hpp).");
  m.def(
      "newton_may_stop",
      [](int iteration, double err, double constraint_err, double err_prev, double correction_err,
         double error_estimate, double close_enough, bool error_control, bool strict) {
        NewtonTolerances tol;
        tol.close_enough = close_enough;
        const NewtonStop s = newton_may_stop({iteration, err, constraint_err, err_prev, correction_err, error_estimate},
                                             tol, error_control, strict);
        return py::make_tuple(s.stop, s.early);
      },
      py::arg("iteration"), py::arg("err"), py::arg("constraint_err"), py::arg("err_prev"),
      py::arg("correction_err"), py::arg("error_estimate"), py::arg("close_enough"), py::arg("error_control"),
      py::arg("strict"), "(stop, early)");
  py::class_<NewtonErrorTest>(m, "NewtonErrorTest")
      .def(py::init<>())
      .def("add_residual", &NewtonErrorTest::add_residual, py::arg("rms_acceleration"))
      .def("add_correction", &NewtonErrorTest::add_correction, py::arg("size"))
      .def("error_estimate", &NewtonErrorTest::error_estimate);
}

}  // namespace ms::bindings
