// Runs the two halves of a loop at once: half 1 on a helper thread, half 0 on the caller.
//
// Why: Blender's Cloth uses the machine's cores, and the core's big loops (assembly, the
// Krylov method's products, the multigrid's prolongation and setup) split into two halves
// whose results are combined in a fixed order. The split is the same whether or not the
// helper runs (one core, or the helper busy with another system), so a run's numbers do
// not depend on the machine (test_core_multigrid.py, test_split_work_gives_the_same_numbers).
//
// The helper spins for a while after each job, so that the next one (microseconds later,
// in a Krylov iteration) finds it awake, then sleeps on a condition variable.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <system_error>
#include <thread>

#ifdef __linux__
#include <sched.h>
#endif

namespace ms {

class TwoWay {
 public:
  // The process's one helper: every system shares it, so that no more threads spin than
  // the machine has cores; a caller that finds it busy runs both halves itself. Never
  // destroyed: the helper ends with the process.
  static TwoWay& shared() {
    static TwoWay* const instance = new TwoWay();
    return *instance;
  }
  TwoWay(const TwoWay&) = delete;
  TwoWay& operator=(const TwoWay&) = delete;

  // Vector loops shorter than this run in one pass: below it a handoff to the helper costs
  // more than half of the loop.
  static constexpr long kMinVectorLength = 16384;

  // Whether the helper may run (tests and benchmarks compare; the numbers are the same).
  void allow_helper(bool on) { enabled_ = on && usable_cores() >= 2; }

  // work(0) and work(1), at once when the helper is free; returns when both are done.
  // An exception from either half is rethrown here.
  void run(const std::function<void(int)>& work) {
    std::unique_lock<std::mutex> own(in_use_, std::try_to_lock);
    if (!enabled_ || !own.owns_lock()) {
      work(0);
      work(1);
      return;
    }
    if (!helper_.joinable()) {
      try {
        helper_ = std::thread([this] { serve(); });
      } catch (const std::system_error&) {  // no thread to be had: one pass for good
        enabled_ = false;
        work(0);
        work(1);
        return;
      }
    }
    failure_ = nullptr;
    std::uint64_t job;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = &work;
      job = posted_.fetch_add(1, std::memory_order_release) + 1;
    }
    wake_.notify_one();
    std::exception_ptr mine;
    try {
      work(0);
    } catch (...) {
      mine = std::current_exception();
    }
    // If the helper has not taken half 1 yet (asleep, or not scheduled), the caller runs
    // it: waking the helper can take longer than the half itself.
    if (take(job)) {
      try {
        work(1);
      } catch (...) {
        if (!mine) mine = std::current_exception();
      }
    } else {
      for (long spins = 0; done_.load(std::memory_order_acquire) != job; ++spins)
        if (spins > 100000) std::this_thread::yield();
    }
    if (mine) std::rethrow_exception(mine);
    if (failure_) std::rethrow_exception(failure_);
  }

 private:
  // How long the helper spins after a job before it sleeps: longer than the serial work
  // between two split loops of a Krylov iteration on big sheets.
  static constexpr std::chrono::microseconds kSpinTime{2000};

  TwoWay() = default;

  // The cores this process may run on (taskset, containers), not the machine's: on one
  // core a spinning helper would only take turns with the caller.
  static int usable_cores() {
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
#endif
    return static_cast<int>(std::thread::hardware_concurrency());
  }

  // Half 1 of job number `job` goes to whoever takes it first, the caller or the helper.
  bool take(std::uint64_t job) {
    std::uint64_t before = job - 1;
    return taken_.compare_exchange_strong(before, job, std::memory_order_acq_rel);
  }

  void serve() {
    std::uint64_t seen = 0;
    for (;;) {
      const auto idle_since = std::chrono::steady_clock::now();
      for (long spins = 1; posted_.load(std::memory_order_acquire) == seen; ++spins)
        if (spins % 1024 == 0 && std::chrono::steady_clock::now() - idle_since > kSpinTime) {
          std::unique_lock<std::mutex> lock(mutex_);
          wake_.wait(lock, [&] { return posted_.load(std::memory_order_acquire) != seen; });
        }
      seen = posted_.load(std::memory_order_acquire);
      if (!take(seen)) continue;  // the caller ran it
      try {
        (*job_)(1);
      } catch (...) {
        failure_ = std::current_exception();
      }
      done_.store(seen, std::memory_order_release);
    }
  }

  std::atomic<bool> enabled_{usable_cores() >= 2};
  std::mutex in_use_;  // one run at a time
  std::mutex mutex_;   // with wake_: the sleeping helper
  std::condition_variable wake_;
  const std::function<void(int)>* job_ = nullptr;  // written before posted_ moves
  std::atomic<std::uint64_t> posted_{0}, taken_{0}, done_{0};
  std::exception_ptr failure_;  // the helper's, read after done_
  std::thread helper_;
};

}  // namespace ms
