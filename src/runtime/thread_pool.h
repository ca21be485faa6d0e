// Thread pool: a fixed set of worker threads running parallel_for over index ranges. The caller
// takes part in the work; idle workers spin for up to 2 ms, then sleep on a condition variable (no busy
// CPU when idle). Each thread first runs its own contiguous share of the chunks (the caller the
// first, worker k the (k+1)-th), then takes what is left of the others': consecutive ops split
// alike (a layer's channels) then find their inputs in the cache of the core that wrote them,
// and a descheduled or late thread's share is still picked up. A parallel_for issued from inside a parallel_for (or while another thread owns
// the pool) runs serially on the calling thread. Generated kernels reach the pool through the C
// ABI function kiln_parallel_for, which uses the current pool of the calling thread.
// Tests: tests/runtime/test_thread_pool.cc
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln {

class ThreadPool {
 public:
  using Body = void (*)(int64_t begin, int64_t end, void* closure);

  // `threads` counts the caller: threads - 1 workers are started. 0 means default_threads().
  explicit ThreadPool(int threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls body(begin, end, closure) over chunks covering [0, n) and returns when all are done.
  // Chunks hold at least `min_chunk` indices.
  void parallel_for(int64_t n, Body body, void* closure, int64_t min_chunk = 1);
  // Same with a callable; the first exception thrown by `fn` is rethrown here.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t min_chunk = 1);

  // Sends idle workers to sleep now instead of after their 2 ms spin: called before work that
  // brings its own threads (an external backend's OpenMP team), which spinning workers would
  // otherwise slow down on a busy machine.
  void park();
  // Runs parallel loops on another runtime's thread team from now on (an external backend's
  // OpenMP team, ext::Backend::thread_team); this pool's workers stay asleep.
  using TeamFn = void (*)(int64_t n, int threads, void (*body)(int64_t i, void* ctx), void* ctx);
  void use_team(TeamFn team) { team_ = team; }
  // The number of hardware threads (at least 1).
  static int default_threads();

 private:
  struct Job {
    Body body = nullptr;
    void* closure = nullptr;
    int64_t n = 0;
    int64_t chunk = 1;
    int64_t num_chunks = 0;
    uint32_t tag = 0;  // the job's generation, as its shares carry it
  };
  // One thread's share of a job's chunks in one word: the job's tag (32 bits), the next chunk
  // and the end (16 bits each), claimed by compare-exchange (by its owner first). A worker still
  // holding an older job finds another tag and claims nothing, so a job waits only for the
  // chunks actually claimed, never for a late or descheduled worker that holds none.
  struct alignas(64) Share {
    std::atomic<uint64_t> state{0};
  };
  void worker_loop(int self);
  void run_chunks(const Job& job, int self);

  std::vector<std::thread> workers_;
  std::mutex submit_;  // one parallel_for at a time; others run serially
  std::mutex mu_;
  std::condition_variable cv_;
  Job job_;  // guarded by mu_
  std::atomic<uint64_t> generation_{0};
  std::unique_ptr<Share[]> shares_;  // per thread (0: the caller), reset per job under mu_
  std::atomic<int64_t> done_chunks_{0};
  std::atomic<uint64_t> park_epoch_{0};
  TeamFn team_ = nullptr;
  bool stop_ = false;           // guarded by mu_
};

// The pool that kiln_parallel_for uses on this thread: the one installed by a ScopedThreadPool,
// else a process-wide pool with default_threads() threads (created on first use).
ThreadPool& current_thread_pool();

// Installs `pool` as this thread's current pool for the scope's lifetime.
class ScopedThreadPool {
 public:
  explicit ScopedThreadPool(ThreadPool* pool);
  ~ScopedThreadPool();
  ScopedThreadPool(const ScopedThreadPool&) = delete;
  ScopedThreadPool& operator=(const ScopedThreadPool&) = delete;

 private:
  ThreadPool* saved_;
};

}  // namespace kiln

// C ABI for generated code: runs body over [0, n) on the current pool.
extern "C" void kiln_parallel_for(int64_t n, void (*body)(int64_t begin, int64_t end, void* closure),
                                  void* closure);
