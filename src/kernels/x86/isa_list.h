// One list per kernel family: an entry per ISA the family has a kernel for, best first. A
// family's KILN_<FAMILY>_KERNELS(X) macro declares the kernels (X(name, Isa)), its *_kernels()
// table is made from the same macro, the dispatch calls the entry of the host target's ISA, and
// the tests run every entry the CPU supports (tests/kernels/*).
#pragma once

#include <vector>

#include "target/target.h"

namespace kiln::kernels {

template <class Fn>
struct IsaKernel {
  const char* name;
  target::Isa isa;
  Fn fn;
};

// The entry of `list` for target::Target::host().isa, or nullptr when the family has none.
template <class Fn>
Fn host_kernel(const std::vector<IsaKernel<Fn>>& list) {
  const target::Isa isa = target::Target::host().isa;
  for (const IsaKernel<Fn>& k : list)
    if (k.isa == isa) return k.fn;
  return nullptr;
}

}  // namespace kiln::kernels

// Inside a *_kernels() definition: one IsaKernel entry per X(name, Isa) of the family's list.
#define KILN_ISA_KERNEL_ENTRY(NAME, ISA) {#NAME, ISA, &NAME},
