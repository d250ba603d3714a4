// The Python module mass_spring._core: errors, constants, the workers, and the systems,
// whose bindings are split by concept (common.hpp lists the files).
#include "bindings/common.hpp"

#include "parallel/parallel_for.hpp"
#include "time/integrators.hpp"

namespace ms::bindings {
namespace {

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

template <int D>
void bind_system(py::module_& m, const std::string& name) {
  SystemClass<D> cls(m, name.c_str());
  bind_seed_api<D>(m, cls, name);
  bind_arrays<D>(cls);
  bind_simulation<D>(cls);
  bind_colliders<D>(cls);
}

}  // namespace

void bind_parallel(py::module_& m) {
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
  m.def(
      "_restart_workers",
      [](int rounds) {
        // For tests: workers made and stopped back to back, the race of a worker that
        // first runs after it was stopped (test_workers_stopped_before_they_ran_end).
        py::gil_scoped_release free;
        WorkerPool& pool = WorkerPool::shared();
        const int before = pool.num_threads();
        std::vector<int> touched(8);
        for (int r = 0; r < rounds; ++r) {
          pool.set_num_threads(2 + r % 3);
          pool.run(8, [&](int c) { touched[c] += 1; });
        }
        pool.set_num_threads(before);
        for (int count : touched)
          if (count != rounds) throw std::logic_error("a chunk ran other than once per round");
      },
      py::arg("rounds"));
  m.def("get_num_threads", [] { return ms::WorkerPool::shared().num_threads(); },
        "The workers big systems' loops run on (set_num_threads).");
  m.def("usable_cores", &ms::WorkerPool::usable_cores,
        "The cores this process may run on (its CPU affinity), the default number of workers.");
}

}  // namespace ms::bindings

using namespace ms;
using namespace ms::bindings;

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
  bind_parallel(m);
  m.attr("SPLIT_MIN_MASSES") = Simulator<3>::kSplitMinMasses;
  m.attr("SPLIT_MIN_VECTOR_LENGTH") = 2 * ms::kVectorGrain;  // two chunks from here on
  m.attr("MULTIGRID_MIN_MASSES") = Simulator<3>::kMultigridMinMasses;
  m.attr("MULTIGRID_MIN_MASSES_CONTROLLED") = Simulator<3>::kMultigridMinMassesControlled;
  m.attr("INTEGRATOR_TABLE") = integrator_table();
  m.attr("SELF_LEAST_DISTANCE_OF_EDGE") = kSelfLeastDistanceOfEdge;
  py::module_ laws = m.def_submodule("laws");
  bind_laws(laws);
  py::module_ step = m.def_submodule("step");
  bind_step(step);

  bind_elements(m);
  bind_collider_queries(m);
  bind_system<2>(m, "MassSpringSystem2d");
  bind_system<3>(m, "MassSpringSystem3d");
}

