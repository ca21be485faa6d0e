// target::Target: host detection agrees with the CPU, KILN_ISA requests are applied or refused
// with a reason, and the code generator's feature limit matches the chosen ISA.
#include <gtest/gtest.h>

#include "target/target.h"

namespace kiln::target {
namespace {

TEST(Target, HostFeaturesMatchTheCpu) {
  const CpuFeatures f = CpuFeatures::detect();
  EXPECT_EQ(f.avx2, static_cast<bool>(__builtin_cpu_supports("avx2")));
  EXPECT_EQ(f.avx512f, static_cast<bool>(__builtin_cpu_supports("avx512f")));
  EXPECT_TRUE(f.supports(Isa::kGeneric));
  EXPECT_TRUE(f.supports(f.best()));
  if (f.best() == Isa::kAvx512) {
    EXPECT_TRUE(f.supports(Isa::kAvx2));
  }
}

TEST(Target, ForHostWithoutRequestTakesTheBestIsa) {
  std::string warning = "stale";
  const Target t = Target::for_host(nullptr, &warning);
  EXPECT_EQ(t.isa, t.features.best());
  EXPECT_TRUE(warning.empty());
  EXPECT_EQ(t.llvm_features(), "");
  EXPECT_EQ(t.f32_lanes() * 32, t.vector_bits);
  EXPECT_GE(t.l2_bytes, 256 << 10);
  EXPECT_GE(t.cores, 1);
  EXPECT_NE(t.describe().find(isa_name(t.isa)), std::string::npos);
}

TEST(Target, RequestedLowerIsaIsApplied) {
  std::string warning;
  const Target t = Target::for_host("generic", &warning);
  EXPECT_TRUE(warning.empty());
  EXPECT_EQ(t.isa, Isa::kGeneric);
  EXPECT_EQ(t.vector_bits, 128);
  if (t.features.best() != Isa::kGeneric) {
    EXPECT_NE(t.llvm_features().find("-avx2"), std::string::npos);
    EXPECT_NE(t.describe().find("CPU has"), std::string::npos);
  }
  if (t.features.supports(Isa::kAvx512)) {
    const Target a = Target::for_host("avx2", &warning);
    EXPECT_EQ(a.isa, Isa::kAvx2);
    EXPECT_EQ(a.vector_bits, 256);
    EXPECT_EQ(a.llvm_features(), "-avx512f");
  }
}

TEST(Target, UnknownOrUnsupportedRequestIsRefusedWithAReason) {
  std::string warning;
  const Target t = Target::for_host("sse9", &warning);
  EXPECT_EQ(t.isa, t.features.best());
  EXPECT_NE(warning.find("KILN_ISA=sse9 names no ISA"), std::string::npos) << warning;
  if (!t.features.supports(Isa::kAvx512)) {
    const Target u = Target::for_host("avx512", &warning);
    EXPECT_EQ(u.isa, u.features.best());
    EXPECT_NE(warning.find("cannot run it"), std::string::npos) << warning;
  }
}

TEST(Target, ParseIsaNamesEveryIsa) {
  for (Isa i : {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512}) {
    Isa parsed = Isa::kGeneric;
    ASSERT_TRUE(parse_isa(isa_name(i), &parsed));
    EXPECT_EQ(parsed, i);
  }
  Isa unused;
  EXPECT_FALSE(parse_isa("AVX2", &unused));
  EXPECT_FALSE(parse_isa("", &unused));
}

}  // namespace
}  // namespace kiln::target
