// The two entry points of GNU OpenMP (libgomp, the runtime Debian's oneDNN is built with) that
// the backend calls. Declared here rather than through <omp.h> and -fopenmp: a clang build
// (the sanitizer presets) would otherwise bring LLVM's OpenMP runtime in beside oneDNN's.
#pragma once

extern "C" {
// Runs fn(data) on a team of num_threads threads, the caller included; returns when all have.
void GOMP_parallel(void (*fn)(void*), void* data, unsigned num_threads, unsigned flags);
void omp_set_num_threads(int threads);
}
