// A kernels::ParallelFor that splits [0, n) between the calling thread and one std::thread, for
// kernel tests that must exercise the parallel paths without a thread pool.
#pragma once

#include <cstdint>
#include <functional>
#include <thread>

#include "kernels/x86/f32_gemm.h"

namespace kiln::testing {

inline kernels::ParallelFor two_threads() {
  return [](int64_t n, std::function<void(int64_t, int64_t)> fn) {
    std::thread t([&] { fn(n / 2, n); });
    fn(0, n / 2);
    t.join();
  };
}

}  // namespace kiln::testing
