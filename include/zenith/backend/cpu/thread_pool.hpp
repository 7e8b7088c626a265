#pragma once
// A small fixed pool that runs one parallel_for at a time: each thread runs its own contiguous
// share of the chunks and then helps with the others'. Callers fix how work is cut into chunks,
// so results never depend on which thread ran what.
// Worker threads never record on an autodiff tape: they only run evaluation loops.
//
// Waking a sleeping thread costs tens of microseconds (a futex call, and on a VM an interrupt to
// an idle virtual CPU), more than a whole fused pass over 64K floats. So a worker that finishes a
// job keeps watching for the next one for ZENITH_SPIN_US microseconds (default 1000) before it
// sleeps, and the caller of parallel_for watches for up to 2 ms for the workers to finish before
// it sleeps. Watching means spinning on the CPU for at most 10 us, then polling with a yield
// between polls, so that on a loaded machine a waiting thread never holds a CPU that the thread
// it waits for (or anyone else) could use. Back-to-back evaluations then hand work over in a
// microsecond or two; an idle pool costs nothing after the spin.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <concepts>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace zenith {

// A non-owning reference to a callable taking a chunk index. parallel_for returns only when
// every chunk has run, so the callable outlives its use. Unlike std::function it never
// allocates and costs one small call thunk per callable type, not a manager as well.
class chunk_fn {
 public:
  template <class F>
  requires(!std::same_as<std::remove_cvref_t<F>, chunk_fn> && std::invocable<F const&, std::size_t>)
      chunk_fn(F const& f)  // NOLINT: implicit, like std::function
      : obj_(std::addressof(f)),
        call_([](void const* o, std::size_t i) { (*static_cast<F const*>(o))(i); }) {}
  void operator()(std::size_t i) const { call_(obj_, i); }

 private:
  void const* obj_;
  void (*call_)(void const*, std::size_t);
};

namespace detail {
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Spins until done() or until `budget` has passed, then (if `yielding` is non-zero) keeps
// polling for up to `yielding` more while giving the CPU to any other runnable thread between
// polls; returns done().
// How long a waiting thread spins on the CPU before it starts yielding between polls. Short:
// on a loaded machine the thread it waits for may be queued on the same CPU behind it.
inline constexpr std::chrono::microseconds pause_window{10};

template <class Done>
bool spin_until(Done const& done, std::chrono::microseconds budget,
                std::chrono::microseconds yielding = std::chrono::microseconds(0)) {
  if (done()) return true;
  auto now = std::chrono::steady_clock::now();
  auto spin_end = now + budget, yield_end = spin_end + yielding;
  while (now < spin_end) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      cpu_relax();
    }
    now = std::chrono::steady_clock::now();
  }
  while (now < yield_end) {
    if (done()) return true;
    std::this_thread::yield();
    now = std::chrono::steady_clock::now();
  }
  return done();
}
}  // namespace detail

class thread_pool {
 public:
  static thread_pool& instance() {
    static thread_pool pool(default_threads());
    return pool;
  }

  std::size_t size() const { return nthreads_; }

  // Changes the number of threads (>= 1); joins the old workers.
  void resize(std::size_t n) {
    n = std::max<std::size_t>(n, 1);
    std::lock_guard run_lock(run_mu_);
    if (n == nthreads_) return;
    stop_workers();
    nthreads_ = n;
    start_workers();
  }

  // Runs f(i) for i in [0, n) and blocks until all have finished. The calling thread takes part
  // as thread 0. Thread t first runs the chunks of its own contiguous share [t*n/T, (t+1)*n/T)
  // in order, so repeated calls touch the same data from the same core (as OpenMP's static
  // schedule does); a thread that runs out takes the not-yet-started chunks of another share
  // from its end. So the caller never waits for a worker that has not woken up yet (on a loaded
  // machine that can take milliseconds), only for chunks already running. Which thread runs a
  // chunk is therefore unspecified: callers make results deterministic by fixing how work is
  // cut into chunks, never by which thread runs what.
  // Called from inside a running chunk (nested), it runs serially on the calling thread. If
  // chunks throw, the first exception is rethrown here once the started chunks have finished;
  // chunks not yet started are skipped.
  void parallel_for(std::size_t n, chunk_fn f) {
    if (n == 0) return;
    if (n == 1 || nthreads_ == 1 || in_worker()) {
      for (std::size_t i = 0; i < n; ++i) f(i);
      return;
    }
    constexpr std::size_t max_job = std::size_t(1) << 31;  // chunk indices fit in 32 bits
    for (std::size_t base = 0; base < n; base += max_job) {
      std::size_t m = std::min(max_job, n - base);
      if (base == 0 && m == n)
        run_job(m, f);
      else
        run_job(m, [&](std::size_t i) { f(base + i); });
    }
  }

  ~thread_pool() { stop_workers(); }

  static bool& in_worker() {
    thread_local bool flag = false;
    return flag;
  }

 private:
  // The chunks of one thread's share not yet started: [lo, hi) packed as lo << 32 | hi. The
  // owner takes from the front, other threads from the back, both by compare-and-swap.
  struct alignas(64) share {
    std::atomic<std::uint64_t> range{0};
  };
  static std::uint64_t pack(std::uint64_t lo, std::uint64_t hi) { return lo << 32 | hi; }

  explicit thread_pool(std::size_t n) : nthreads_(std::max<std::size_t>(n, 1)), spin_(spin_time()) {
    start_workers();
  }

  static std::size_t default_threads() {
    if (char const* env = std::getenv("ZENITH_NUM_THREADS")) {
      long v = std::strtol(env, nullptr, 10);
      if (v > 0) return std::size_t(v);
    }
    return std::max(1u, std::thread::hardware_concurrency());
  }
  static std::chrono::microseconds spin_time() {
    if (char const* env = std::getenv("ZENITH_SPIN_US")) {
      long v = std::strtol(env, nullptr, 10);
      if (v >= 0) return std::chrono::microseconds(v);
    }
    return std::chrono::microseconds(1000);
  }

  // One job: publish it, work on it as thread 0, then wait for the chunks still running.
  void run_job(std::size_t n, chunk_fn f) {
    std::lock_guard run_lock(run_mu_);
    job_ = &f;
    error_ = nullptr;
    failed_.store(false, std::memory_order_relaxed);
    remaining_.store(n, std::memory_order_relaxed);
    // Release: a thread that takes a chunk from a share sees job_ and the counters above.
    for (std::size_t t = 0; t < nthreads_; ++t)
      shares_[t].range.store(pack(t * n / nthreads_, (t + 1) * n / nthreads_),
                             std::memory_order_release);
    {
      // Publishing under mu_ pairs with a worker's check-then-sleep under mu_: a worker either
      // sees the new job before it sleeps, or is asleep and gets the notification.
      std::lock_guard lock(mu_);
      generation_.fetch_add(1, std::memory_order_release);
      if (sleeping_ > 0) cv_.notify_all();
    }
    {
      struct worker_scope {  // a nested parallel_for inside a chunk runs serially
        bool saved = in_worker();
        worker_scope() { in_worker() = true; }
        ~worker_scope() { in_worker() = saved; }
      } scope;
      work(0);
    }
    // The caller has nothing else to do: it spins briefly, then polls while yielding its CPU (to
    // a worker that may share it) for up to 2 ms, and only then sleeps.
    auto done = [&] { return remaining_.load(std::memory_order_acquire) == 0; };
    if (!detail::spin_until(done, detail::pause_window, std::chrono::milliseconds(2))) {
      std::unique_lock lock(mu_);
      done_cv_.wait(lock, done);
    }
    job_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

  // Takes a chunk from the front (own share) or the back (another's); false if it is empty.
  // Shares only ever hold chunks of the running job, and a taken chunk keeps that job running
  // (its caller waits for remaining_), so job_ may be read after a successful take.
  bool take(std::size_t t, bool front, std::uint32_t& chunk) {
    auto& r = shares_[t].range;
    std::uint64_t v = r.load(std::memory_order_acquire);
    for (;;) {
      std::uint64_t lo = v >> 32, hi = v & 0xffffffffu;
      if (lo >= hi) return false;
      std::uint64_t next = front ? pack(lo + 1, hi) : pack(lo, hi - 1);
      if (r.compare_exchange_weak(v, next, std::memory_order_acq_rel, std::memory_order_acquire)) {
        chunk = std::uint32_t(front ? lo : hi - 1);
        return true;
      }
    }
  }

  // Runs chunks (own share first, then others') until none is left to take.
  void work(std::size_t tid) {
    for (;;) {
      std::uint32_t chunk = 0;
      bool got = take(tid, true, chunk);
      for (std::size_t k = 1; !got && k < nthreads_; ++k)
        got = take((tid + k) % nthreads_, false, chunk);
      if (!got) return;
      if (!failed_.load(std::memory_order_relaxed)) {
        try {
          (*job_)(chunk);
        } catch (...) {
          std::lock_guard lock(mu_);
          if (!error_) error_ = std::current_exception();
          failed_.store(true, std::memory_order_relaxed);
        }
      }
      if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard lock(mu_);  // the caller may be between its check and its sleep
        done_cv_.notify_one();
        return;
      }
    }
  }

  void start_workers() {
    stopping_.store(false);
    shares_ = std::make_unique<share[]>(nthreads_);
    std::uint64_t gen = generation_.load();  // workers wait for jobs after this one
    for (std::size_t t = 1; t < nthreads_; ++t)
      workers_.emplace_back([this, t, gen] { worker_loop(t, gen); });
  }
  void stop_workers() {
    {
      std::lock_guard lock(mu_);
      stopping_.store(true);
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
    workers_.clear();
  }

  void worker_loop(std::size_t tid, std::uint64_t seen) {
    in_worker() = true;
    for (;;) {
      auto ready = [&] {
        return stopping_.load(std::memory_order_relaxed) ||
               generation_.load(std::memory_order_acquire) != seen;
      };
      if (!detail::spin_until(ready, std::min(spin_, detail::pause_window),
                              spin_ - std::min(spin_, detail::pause_window))) {
        std::unique_lock lock(mu_);
        ++sleeping_;
        cv_.wait(lock, ready);
        --sleeping_;
      }
      if (stopping_.load()) return;
      seen = generation_.load(std::memory_order_acquire);
      work(tid);
    }
  }

  std::size_t nthreads_;
  std::chrono::microseconds spin_;
  std::vector<std::thread> workers_;
  std::unique_ptr<share[]> shares_;  // one per thread
  std::mutex mu_, run_mu_;
  std::condition_variable cv_, done_cv_;
  // The current job; job_ and the counters are written before the shares are filled (release).
  chunk_fn const* job_ = nullptr;
  std::atomic<std::size_t> remaining_{0};  // chunks not yet finished
  std::atomic<bool> failed_{false};        // a chunk threw: skip the ones not yet started
  std::exception_ptr error_;               // guarded by mu_
  std::atomic<std::uint64_t> generation_{0};
  std::size_t sleeping_ = 0;  // workers blocked on cv_ (guarded by mu_)
  std::atomic<bool> stopping_{false};
};

inline void set_num_threads(std::size_t n) { thread_pool::instance().resize(n); }
inline std::size_t get_num_threads() { return thread_pool::instance().size(); }

}  // namespace zenith
