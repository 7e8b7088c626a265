#pragma once
// A small fixed pool that runs one parallel_for at a time. Work is split into as many chunks as
// threads, in a fixed way, so a given thread count always gives bitwise the same results.
// Worker threads never record on an autodiff tape: they only run evaluation loops.
#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdlib>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace zenith {

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
    stop_workers();
    nthreads_ = n;
    start_workers();
  }

  // Runs f(i) for i in [0, n); chunk i runs on thread i % size(). Blocks until all finish.
  // Called from inside a worker (nested), it runs serially on the caller.
  void parallel_for(std::size_t n, std::function<void(std::size_t)> const& f) {
    if (n == 0) return;
    if (n == 1 || nthreads_ == 1 || in_worker()) {
      for (std::size_t i = 0; i < n; ++i) f(i);
      return;
    }
    std::lock_guard run_lock(run_mu_);
    {
      std::lock_guard lock(mu_);
      job_ = &f;
      job_size_ = n;
      pending_ = workers_.size();
      error_ = nullptr;
      ++generation_;
    }
    cv_.notify_all();
    try {
      run_share(0, f, n);  // the caller is thread 0
    } catch (...) {
      std::lock_guard lock(mu_);
      if (!error_) error_ = std::current_exception();
    }
    std::unique_lock lock(mu_);
    done_cv_.wait(lock, [&] { return pending_ == 0; });
    job_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

  ~thread_pool() { stop_workers(); }

  static bool& in_worker() {
    thread_local bool flag = false;
    return flag;
  }

 private:
  explicit thread_pool(std::size_t n) : nthreads_(std::max<std::size_t>(n, 1)) { start_workers(); }

  static std::size_t default_threads() {
    if (char const* env = std::getenv("ZENITH_NUM_THREADS")) {
      long v = std::strtol(env, nullptr, 10);
      if (v > 0) return std::size_t(v);
    }
    return std::max(1u, std::thread::hardware_concurrency());
  }

  void run_share(std::size_t tid, std::function<void(std::size_t)> const& f, std::size_t n) {
    for (std::size_t i = tid; i < n; i += nthreads_) f(i);
  }

  void start_workers() {
    stopping_ = false;
    std::size_t gen = generation_;  // workers wait for jobs after this one
    for (std::size_t t = 1; t < nthreads_; ++t)
      workers_.emplace_back([this, t, gen] { worker_loop(t, gen); });
  }
  void stop_workers() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
    workers_.clear();
  }

  void worker_loop(std::size_t tid, std::size_t seen) {
    in_worker() = true;
    for (;;) {
      std::function<void(std::size_t)> const* job;
      std::size_t n;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
        job = job_;
        n = job_size_;
      }
      try {
        run_share(tid, *job, n);
      } catch (...) {
        std::lock_guard lock(mu_);
        if (!error_) error_ = std::current_exception();
      }
      {
        std::lock_guard lock(mu_);
        if (--pending_ == 0) done_cv_.notify_one();
      }
    }
  }

  std::size_t nthreads_;
  std::vector<std::thread> workers_;
  std::mutex mu_, run_mu_;
  std::condition_variable cv_, done_cv_;
  std::function<void(std::size_t)> const* job_ = nullptr;
  std::size_t job_size_ = 0, pending_ = 0, generation_ = 0;
  std::exception_ptr error_;
  bool stopping_ = false;
};

inline void set_num_threads(std::size_t n) { thread_pool::instance().resize(n); }
inline std::size_t get_num_threads() { return thread_pool::instance().size(); }

}  // namespace zenith
