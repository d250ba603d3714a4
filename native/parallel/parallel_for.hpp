// Parallel loops over fixed chunks, on any number of workers, with the same numbers.
//
// A loop is cut into chunks by its length alone (chunk_count), never by the number of
// workers: each chunk computes the same values whoever runs it, and whatever the chunks
// produce is combined in chunk order afterwards (a sum of per-chunk sums, per-chunk
// buffers added in order). So a run's numbers do not depend on the machine or on
// set_num_threads (test_core_parallel.py, test_any_number_of_workers_gives_the_same_bits).
//
// The workers are the process's: every system shares them, so that no more threads run
// than the user asked for; a caller that finds them busy (another system on another
// thread) runs its chunks itself. Idle workers wait on a condition variable after a short
// spin, long enough to catch the next loop of a Krylov iteration (microseconds later).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#ifdef __linux__
#include <sched.h>
#endif

namespace ms {

// At most this many chunks per loop: enough for the workers of a 16-core machine. The
// chunks are fixed by the loop's length, so a machine's result does not depend on its
// cores; more chunks cost one worker nothing measurable once each chunk wrote its own
// run of the matrix (docs/performance.md, "All cores, the same bits").
constexpr int kMaxChunks = 16;

// Vector loops (GMRES, the Newton iteration's per-mass passes) get one chunk per this many
// entries: a shorter loop runs faster alone than handed over.
constexpr long kVectorGrain = 8192;

// The chunks a loop of `items` is cut into: about one per `grain` items, 1 to kMaxChunks,
// a power of two, so that 2, 4, 8 or 16 workers share them evenly.
inline int chunk_count(long items, long grain) {
  if (items <= grain || grain <= 0) return 1;
  int chunks = 1;
  while (2 * chunks <= kMaxChunks && 2L * chunks * grain <= items) chunks *= 2;
  return chunks;
}

// Chunk c of `chunks` equal parts of [0, n): its first item (chunk_begin(n, chunks, chunks) == n).
inline long chunk_begin(long n, int chunks, int c) {
  return static_cast<long>(static_cast<long long>(n) * c / chunks);
}

class WorkerPool {
 public:
  static WorkerPool& shared() {
    static WorkerPool* const instance = new WorkerPool();  // never destroyed: see stop()
    return *instance;
  }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // The cores this process may run on (taskset, containers), not the machine's.
  static int usable_cores() {
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
#endif
    return std::max(1u, std::thread::hardware_concurrency());
  }

  // Workers including the caller, n >= 1. Waits for a running loop to finish.
  void set_num_threads(int n) {
    std::lock_guard<std::mutex> own(in_use_);
    stop();
    num_threads_ = std::max(1, n);
    next_.reset(new std::atomic<int>[num_threads_]);
  }
  int num_threads() const { return num_threads_; }

  // work(c) for every chunk c in [0, chunks), on up to num_threads() workers (the caller
  // among them); returns when all are done. If chunks fail, the exception of the first
  // failing chunk is rethrown (the same one whatever ran it).
  //
  // The hand-over takes no lock unless a worker sleeps: a loop is posted by publishing
  // its generation (release), and closed by clearing open_; a worker counts itself in
  // active_ before it checks that its loop is still open, and the caller clears open_
  // before it waits for active_ to reach zero, so that (all four sequentially consistent)
  // either the worker sees the loop closed or the caller waits for it.
  void run(int chunks, const std::function<void(int)>& work) {
    std::unique_lock<std::mutex> own(in_use_, std::defer_lock);
    // A loop inside a chunk runs on its caller (in_chunk(): try_lock on a mutex the thread
    // holds would be undefined).
    if (chunks <= 1 || num_threads_ <= 1 || in_chunk() || !own.try_lock() || !start_workers()) {
      for (int c = 0; c < chunks; ++c) work(c);
      return;
    }
    failures_.assign(chunks, nullptr);
    job_ = &work;
    chunks_ = chunks;
    parties_ = std::min(chunks, num_threads_);
    for (int party = 0; party < parties_; ++party)
      next_[party].store(first_chunk(party, chunks), std::memory_order_relaxed);
    const unsigned long loop = generation_.load(std::memory_order_relaxed) + 1;
    open_.store(loop);
    generation_.store(loop);
    wake_sleepers();
    run_chunks(work, chunks, 0);
    open_.store(0);  // from here no worker joins this loop
    for (long spins = 0; active_.load() != 0; ++spins) {
      cpu_relax();
      if (spins > 1000) std::this_thread::yield();
    }
    for (const std::exception_ptr& failure : failures_)
      if (failure) std::rethrow_exception(failure);
  }

 private:
  // How long a worker spins after a loop before it sleeps.
  static constexpr std::chrono::microseconds kSpinTime{2000};

  WorkerPool() : num_threads_(usable_cores()), next_(new std::atomic<int>[num_threads_]) {}

  static bool& in_chunk() {
    static thread_local bool inside = false;
    return inside;
  }

  // A spinning thread's hint to the core (it leaves the other hardware thread its share).
  static void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }

  // After a new generation: wakes the workers asleep on wake_. A worker counts itself in
  // sleepers_ before it checks the generation one last time and waits, so one that this
  // misses has seen the new generation.
  void wake_sleepers() {
    if (sleepers_.load() == 0) return;
    { std::lock_guard<std::mutex> lock(mutex_); }
    wake_.notify_all();
  }

  // Party p (the caller 0, worker p) owns the chunks from first_chunk(p) to
  // first_chunk(p + 1): the same ones in every loop of that many chunks, so that each
  // keeps its part of the data in its core's cache (claiming chunks from one counter moved
  // them between cores: docs/performance.md, "All cores, the same bits").
  int first_chunk(int party, int chunks) const { return static_cast<int>(chunk_begin(chunks, parties_, party)); }

  // Runs party `party`'s own chunks, then takes the chunks others have not reached yet
  // (a worker still asleep, or busy elsewhere) from the start of their ranges.
  void run_chunks(const std::function<void(int)>& work, int chunks, int party) {
    in_chunk() = true;
    struct Leave {
      ~Leave() { in_chunk() = false; }
    } leave;
    for (int k = 0; k < parties_; ++k) {
      const int owner = (party + k) % parties_, end = first_chunk(owner + 1, chunks);
      for (int c; (c = next_[owner].fetch_add(1, std::memory_order_acq_rel)) < end;) {
        try {
          work(c);
        } catch (...) {
          failures_[c] = std::current_exception();
        }
      }
    }
  }

  // Starts the num_threads() - 1 workers if they are not running; false if the system
  // has no threads to give (then loops run on the caller alone).
  bool start_workers() {
    if (static_cast<int>(workers_.size()) == num_threads_ - 1) return true;
    try {
      quit_.store(false);
      // A new worker starts from the generation of now, not of when it first runs: a
      // stop() before then must wake it (test_core_parallel.py,
      // test_workers_stopped_before_they_ran_end).
      const unsigned long now = generation_.load();
      for (int id = static_cast<int>(workers_.size()) + 1; id < num_threads_; ++id)
        workers_.emplace_back([this, id, now] { serve(id, now); });
    } catch (const std::system_error&) {
      stop();
      num_threads_ = 1;
      return false;
    }
    return true;
  }

  // Ends the workers (with in_use_ held). The shared pool is never destroyed, so a
  // process exit never joins threads that might be blocked.
  void stop() {
    quit_.store(true);
    generation_.fetch_add(1);
    { std::lock_guard<std::mutex> lock(mutex_); }
    wake_.notify_all();
    for (std::thread& t : workers_) t.join();
    workers_.clear();
  }

  // Until the generation moves on from `seen`: spins for kSpinTime, then sleeps.
  void await_generation(unsigned long seen) {
    const auto idle_since = std::chrono::steady_clock::now();
    for (long spins = 1; generation_.load(std::memory_order_acquire) == seen; ++spins) {
      cpu_relax();
      if (spins % 256 == 0 && std::chrono::steady_clock::now() - idle_since > kSpinTime) {
        std::unique_lock<std::mutex> lock(mutex_);
        sleepers_.fetch_add(1);
        wake_.wait(lock, [&] { return generation_.load() != seen; });
        sleepers_.fetch_sub(1);
      }
    }
  }

  // Worker `id` (1 ...) takes part in loops of more than `id` chunks, from those posted
  // after generation `seen`.
  void serve(int id, unsigned long seen) {
    for (;;) {
      await_generation(seen);
      seen = generation_.load();
      if (quit_.load()) return;
      active_.fetch_add(1);
      // job_ and chunks_ belong to loop `seen` only while it is open; the caller waits
      // for active_ before it posts another.
      if (open_.load() == seen && id < chunks_) run_chunks(*job_, chunks_, id);
      active_.fetch_sub(1);
    }
  }

  int num_threads_;
  std::mutex in_use_;  // one loop at a time
  std::mutex mutex_;   // with wake_, the sleeping workers
  std::condition_variable wake_;
  const std::function<void(int)>* job_ = nullptr;
  int chunks_ = 0, parties_ = 0;  // parties_: the caller and the workers that take part
  std::atomic<bool> quit_{false};
  std::atomic<unsigned long> generation_{0};
  std::atomic<unsigned long> open_{0};  // the generation of the loop workers may join (0: none)
  std::atomic<int> active_{0}, sleepers_{0};
  std::unique_ptr<std::atomic<int>[]> next_;  // each party's next chunk, num_threads_ of them
  std::vector<std::exception_ptr> failures_;  // one per chunk
  std::vector<std::thread> workers_;
};

// The sum over chunks of part(first, last) for `chunks` equal parts of [0, n), added in
// chunk order: the same bits on any number of workers.
template <class T, class Part>
T sum_over_chunks(long n, int chunks, const Part& part) {
  if (chunks <= 1) return part(0L, n);
  std::vector<T> parts(chunks, T{});
  WorkerPool::shared().run(chunks, [&](int c) {
    parts[c] = part(chunk_begin(n, chunks, c), chunk_begin(n, chunks, c + 1));
  });
  T total = parts[0];
  for (int c = 1; c < chunks; ++c) total = total + parts[c];
  return total;
}

// rows(first, last) over `chunks` equal parts of [0, n), at once.
template <class Rows>
void for_chunks(long n, int chunks, const Rows& rows) {
  if (chunks <= 1) return rows(0L, n);
  WorkerPool::shared().run(chunks, [&](int c) {
    rows(chunk_begin(n, chunks, c), chunk_begin(n, chunks, c + 1));
  });
}

}  // namespace ms
