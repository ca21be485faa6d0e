// Thread pool: jobs are published under a mutex with a generation counter; workers copy the job
// under the mutex and claim chunks from per-thread shares (their own first, then the others'),
// each share tagged with its job's generation. The caller claims chunks too and then waits
// (spinning, then yielding) until every chunk is done: not for workers that claimed none.
#include "runtime/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <memory>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KILN_CPU_RELAX() _mm_pause()
#else
#define KILN_CPU_RELAX() ((void)0)
#endif

namespace kiln {
namespace {

constexpr int kSpinIterations = 1 << 14;  // the caller's wait before it starts yielding
// How long an idle worker spins before it sleeps: a model's ops follow each other closely, but a
// serial stretch between two parallel ones (a small kernel, the executor's bookkeeping) can take
// a few hundred microseconds, and waking a sleeping worker costs 50-500 us on a loaded VM.
constexpr auto kWorkerSpin = std::chrono::microseconds(2000);
thread_local int tl_parallel_depth = 0;   // > 0 inside a parallel_for body
thread_local ThreadPool* tl_current_pool = nullptr;

struct DepthGuard {
  DepthGuard() { ++tl_parallel_depth; }
  ~DepthGuard() { --tl_parallel_depth; }
};

}  // namespace

int ThreadPool::default_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = default_threads();
  shares_ = std::make_unique<Share[]>(static_cast<size_t>(threads));
  workers_.reserve(static_cast<size_t>(threads - 1));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunks(const Job& job, int self) {
  DepthGuard depth;
  const int threads = num_threads();
  for (int k = 0; k < threads; ++k) {
    std::atomic<uint64_t>& state = shares_[static_cast<size_t>((self + k) % threads)].state;
    uint64_t v = state.load(std::memory_order_acquire);
    for (;;) {
      if (static_cast<uint32_t>(v >> 32) != job.tag) return;  // a newer job: this one is done
      const int64_t c = static_cast<int64_t>((v >> 16) & 0xffff);
      if (c >= static_cast<int64_t>(v & 0xffff)) break;
      if (!state.compare_exchange_weak(v, v + (uint64_t{1} << 16), std::memory_order_acq_rel,
                                       std::memory_order_acquire))
        continue;
      const int64_t begin = c * job.chunk;
      const int64_t end = std::min(job.n, begin + job.chunk);
      job.body(begin, end, job.closure);
      done_chunks_.fetch_add(1, std::memory_order_release);
      v = state.load(std::memory_order_acquire);
    }
  }
}

void ThreadPool::worker_loop(int self) {
  uint64_t seen = 0;
  for (;;) {
    const auto spin_end = std::chrono::steady_clock::now() + kWorkerSpin;
    const uint64_t parked = park_epoch_.load(std::memory_order_relaxed);
    while (generation_.load(std::memory_order_acquire) == seen) {
      for (int i = 0; i < 8; ++i) KILN_CPU_RELAX();
      if (std::chrono::steady_clock::now() >= spin_end || park_epoch_.load(std::memory_order_relaxed) != parked) break;
    }
    Job job;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || generation_.load(std::memory_order_relaxed) != seen; });
      if (stop_) return;
      seen = generation_.load(std::memory_order_relaxed);
      job = job_;
    }
    run_chunks(job, self);
  }
}

void ThreadPool::park() { park_epoch_.fetch_add(1, std::memory_order_relaxed); }

void ThreadPool::parallel_for(int64_t n, Body body, void* closure, int64_t min_chunk) {
  if (n <= 0) return;
  min_chunk = std::max<int64_t>(min_chunk, 1);
  const int64_t threads = num_threads();
  if (threads == 1 || n <= min_chunk || tl_parallel_depth > 0 || !submit_.try_lock()) {
    DepthGuard depth;
    body(0, n, closure);
    return;
  }
  std::lock_guard<std::mutex> submit(submit_, std::adopt_lock);
  // A few chunks per thread balances uneven work without much claiming overhead (at most
  // 4 * threads chunks: the shares count them in 16 bits).
  int64_t chunk = std::max(min_chunk, (n + threads * 4 - 1) / (threads * 4));
  Job job{body, closure, n, chunk, (n + chunk - 1) / chunk, 0};
  if (team_) {
    auto run_chunk = [](int64_t c, void* p) {
      const Job& j = *static_cast<const Job*>(p);
      DepthGuard depth;
      const int64_t begin = c * j.chunk;
      j.body(begin, std::min(j.n, begin + j.chunk), j.closure);
    };
    team_(job.num_chunks, static_cast<int>(threads), +run_chunk, &job);
    return;
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    job.tag = static_cast<uint32_t>(generation_.load(std::memory_order_relaxed) + 1);
    job_ = job;
    done_chunks_.store(0, std::memory_order_relaxed);
    for (int64_t t = 0; t < threads; ++t) {
      const uint64_t begin = static_cast<uint64_t>(t * job.num_chunks / threads);
      const uint64_t end = static_cast<uint64_t>((t + 1) * job.num_chunks / threads);
      shares_[static_cast<size_t>(t)].state.store((uint64_t{job.tag} << 32) | (begin << 16) | end,
                                                  std::memory_order_release);
    }
    generation_.fetch_add(1, std::memory_order_release);
  }
  cv_.notify_all();
  run_chunks(job, 0);
  for (int i = 0; done_chunks_.load(std::memory_order_acquire) < job.num_chunks; ++i) {
    if (i < kSpinIterations) KILN_CPU_RELAX();
    else std::this_thread::yield();
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t min_chunk) {
  struct Closure {
    const std::function<void(int64_t, int64_t)>* fn;
    std::mutex mu;
    std::exception_ptr error;
  } c{&fn, {}, nullptr};
  auto trampoline = [](int64_t b, int64_t e, void* p) {
    auto* cl = static_cast<Closure*>(p);
    try {
      (*cl->fn)(b, e);
    } catch (...) {
      std::lock_guard<std::mutex> lk(cl->mu);
      if (!cl->error) cl->error = std::current_exception();
    }
  };
  parallel_for(n, +trampoline, &c, min_chunk);
  if (c.error) std::rethrow_exception(c.error);
}

ThreadPool& current_thread_pool() {
  if (tl_current_pool) return *tl_current_pool;
  static ThreadPool global_pool(ThreadPool::default_threads());
  return global_pool;
}

ScopedThreadPool::ScopedThreadPool(ThreadPool* pool) : saved_(tl_current_pool) { tl_current_pool = pool; }
ScopedThreadPool::~ScopedThreadPool() { tl_current_pool = saved_; }

}  // namespace kiln

extern "C" void kiln_parallel_for(int64_t n, void (*body)(int64_t, int64_t, void*), void* closure) {
  kiln::current_thread_pool().parallel_for(n, body, closure);
}
