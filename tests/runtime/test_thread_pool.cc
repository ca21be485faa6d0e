// Thread pool: every index is visited exactly once, each thread starts in its own share, nested
// calls run serially, many small calls in a row, concurrent callers, exceptions, and the C ABI
// entry point.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime/thread_pool.h"

namespace kiln {
namespace {

TEST(ThreadPool, SumsOverRanges) {
  ThreadPool pool(4);
  EXPECT_EQ(pool.num_threads(), 4);
  for (int64_t n : {0, 1, 2, 3, 7, 16, 100, 1001, 100000}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    std::atomic<int64_t> sum{0};
    pool.parallel_for(n, [&](int64_t b, int64_t e) {
      ASSERT_LE(0, b);
      ASSERT_LE(b, e);
      ASSERT_LE(e, n);
      int64_t s = 0;
      for (int64_t i = b; i < e; ++i) {
        hits[static_cast<size_t>(i)]++;
        s += i;
      }
      sum += s;
    });
    EXPECT_EQ(sum.load(), n * (n - 1) / 2) << n;
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  }
}

// The caller's first chunk lies in the first half of the range and the worker's in the second
// (whatever the timing: a thread only leaves its share once that share is all claimed), so ops
// that split alike keep their data on one core; every chunk still runs exactly once.
TEST(ThreadPool, ThreadsStartInTheirOwnShare) {
  ThreadPool pool(2);
  const std::thread::id caller = std::this_thread::get_id();
  for (int rep = 0; rep < 20; ++rep) {
    std::atomic<int> first_caller{-1}, first_worker{-1};
    std::vector<std::atomic<int>> hits(8);
    pool.parallel_for(8, [&](int64_t b, int64_t e) {
      std::atomic<int>& first = std::this_thread::get_id() == caller ? first_caller : first_worker;
      int unset = -1;
      first.compare_exchange_strong(unset, static_cast<int>(b));
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    });
    for (auto& h : hits) EXPECT_EQ(h.load(), 1);
    EXPECT_LT(first_caller.load(), 4);  // -1 when the worker ran every chunk
    if (first_worker.load() >= 0) {
      EXPECT_GE(first_worker.load(), 4);
    }
  }
}

TEST(ThreadPool, MinChunk) {
  ThreadPool pool(4);
  std::atomic<int> calls{0};
  pool.parallel_for(100, [&](int64_t b, int64_t e) {
    if (e != 100) {
      EXPECT_GE(e - b, 40);
    }
    calls++;
  }, 40);
  EXPECT_LE(calls.load(), 3);
}

TEST(ThreadPool, NestedRunsSerially) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  pool.parallel_for(10, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      std::thread::id self = std::this_thread::get_id();
      pool.parallel_for(50, [&](int64_t b2, int64_t e2) {
        EXPECT_EQ(std::this_thread::get_id(), self);
        total += e2 - b2;
      });
    }
  });
  EXPECT_EQ(total.load(), 500);
}

TEST(ThreadPool, ManySmallCalls) {
  ThreadPool pool(4);
  int64_t expect = 0, got = 0;
  for (int k = 0; k < 20000; ++k) {
    int64_t n = k % 9;
    std::atomic<int64_t> s{0};
    pool.parallel_for(n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) s += i + k;
    });
    got += s.load();
    for (int64_t i = 0; i < n; ++i) expect += i + k;
  }
  EXPECT_EQ(got, expect);
}

TEST(ThreadPool, ConcurrentCallers) {
  ThreadPool pool(4);
  std::vector<std::thread> callers;
  std::atomic<int64_t> total{0};
  for (int t = 0; t < 3; ++t)
    callers.emplace_back([&] {
      for (int k = 0; k < 500; ++k)
        pool.parallel_for(64, [&](int64_t b, int64_t e) { total += e - b; });
    });
  for (auto& c : callers) c.join();
  EXPECT_EQ(total.load(), 3 * 500 * 64);
}

TEST(ThreadPool, ExceptionPropagates) {
  ThreadPool pool(4);
  EXPECT_THROW(pool.parallel_for(1000, [&](int64_t b, int64_t) {
    if (b == 0) throw std::runtime_error("boom");
  }), std::runtime_error);
  // The pool still works afterwards.
  std::atomic<int64_t> n{0};
  pool.parallel_for(1000, [&](int64_t b, int64_t e) { n += e - b; });
  EXPECT_EQ(n.load(), 1000);
}

TEST(ThreadPool, SingleThreadPool) {
  ThreadPool pool(1);
  int calls = 0;
  pool.parallel_for(100, [&](int64_t b, int64_t e) {
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 100);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
}

TEST(ThreadPool, CAbiUsesScopedPool) {
  ThreadPool pool(3);
  ScopedThreadPool scope(&pool);
  EXPECT_EQ(&current_thread_pool(), &pool);
  std::vector<int64_t> data(1000);
  kiln_parallel_for(
      1000,
      [](int64_t b, int64_t e, void* p) {
        auto* d = static_cast<std::vector<int64_t>*>(p);
        for (int64_t i = b; i < e; ++i) (*d)[static_cast<size_t>(i)] = i * 2;
      },
      &data);
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(data[static_cast<size_t>(i)], i * 2);
}

}  // namespace
}  // namespace kiln
