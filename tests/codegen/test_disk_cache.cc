// codegen/llvm disk cache: a module compiled twice with the same cache directory is a hit the
// second time and computes the same; another kernel or target is a miss; a corrupted object is
// ignored (miss, recompiled); a disabled cache writes nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <unistd.h>
#include <vector>

#include "codegen/llvm/codegen.h"
#include "codegen/llvm/disk_cache.h"
#include "tir/ir.h"

namespace kiln {
namespace {

using namespace tir;
using codegen::JitModule;
namespace fs = std::filesystem;

extern "C" void disk_cache_test_parallel_for(int64_t n, void (*body)(int64_t, int64_t, void*), void* closure) {
  int64_t mid = n / 2;
  std::thread t([&] { body(0, mid, closure); });
  body(mid, n, closure);
  t.join();
}

codegen::SymbolMap symbols() {
  return {{"kiln_parallel_for", reinterpret_cast<void*>(&disk_cache_test_parallel_for)}};
}

// C[i] = exp(A[i]) * scale + B[i], a parallel loop over i < n.
PrimFunc kernel(const std::string& name, float scale) {
  Expr n = make_var("n");
  Buffer a = make_buffer("A", DType::kFloat32, {n});
  Buffer b = make_buffer("B", DType::kFloat32, {n});
  Buffer c = make_buffer("C", DType::kFloat32, {n});
  Expr i = make_var("i");
  Expr v = call("exp", DataType{DType::kFloat32, 1}, {load(a, {i})}) * float_imm(scale) + load(b, {i});
  return {name, {a, b, c}, {n}, for_loop(i, int_imm(0), n, ForKind::kParallel, store(c, {i}, v))};
}

std::vector<float> run(const JitModule& m, const std::string& name) {
  const int64_t n = 1003;
  std::vector<float> a(n), b(n), c(n, -1);
  for (int64_t i = 0; i < n; ++i) a[i] = 0.01f * static_cast<float>(i % 300) - 1.0f, b[i] = 2.0f - 0.5f * i;
  void* bufs[] = {a.data(), b.data(), c.data()};
  int64_t scalars[] = {n};
  m.lookup(name)(bufs, scalars);
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(c[i], std::exp(a[i]) * 1.5f + b[i], 1e-4f * (1 + std::fabs(c[i]))) << i;
  return c;
}

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("kiln_disk_cache_test_" + std::to_string(::getpid()));
    fs::remove_all(path);
  }
  ~TempDir() { fs::remove_all(path); }
  size_t files() const {
    if (!fs::exists(path)) return 0;
    return static_cast<size_t>(std::distance(fs::directory_iterator(path), fs::directory_iterator()));
  }
};

codegen::TargetOptions with_dir(const TempDir& d) {
  codegen::TargetOptions o;
  o.cache_dir = d.path.string();
  return o;
}

TEST(CodegenDiskCache, SecondCompileIsAHitWithIdenticalResults) {
  TempDir dir;
  auto first = JitModule::compile({kernel("k", 1.5f)}, with_dir(dir), symbols());
  EXPECT_FALSE(first->from_cache());
  EXPECT_EQ(first->cache_dir(), dir.path.string());
  EXPECT_EQ(dir.files(), 3u);  // <key>.o, <key>.ll and <key>.key
  auto second = JitModule::compile({kernel("k", 1.5f)}, with_dir(dir), symbols());
  EXPECT_TRUE(second->from_cache());
  EXPECT_EQ(run(*first, "k"), run(*second, "k"));
  EXPECT_EQ(second->llvm_ir(), first->llvm_ir());
  EXPECT_NE(second->llvm_ir().find("define void @k"), std::string::npos);
  EXPECT_EQ(dir.files(), 3u);
}

TEST(CodegenDiskCache, OtherKernelOrTargetIsAMiss) {
  TempDir dir;
  EXPECT_FALSE(JitModule::compile({kernel("k", 1.5f)}, with_dir(dir), symbols())->from_cache());
  EXPECT_FALSE(JitModule::compile({kernel("k2", 1.5f)}, with_dir(dir), symbols())->from_cache());
  EXPECT_FALSE(JitModule::compile({kernel("k", 2.5f)}, with_dir(dir), symbols())->from_cache());
  codegen::TargetOptions o1 = with_dir(dir);
  o1.opt_level = 1;
  auto m = JitModule::compile({kernel("k", 1.5f)}, o1, symbols());
  EXPECT_FALSE(m->from_cache());
  run(*m, "k");
  codegen::TargetOptions generic = with_dir(dir);
  generic.cpu = "x86-64";
  EXPECT_FALSE(JitModule::compile({kernel("k", 1.5f)}, generic, symbols())->from_cache());
  EXPECT_EQ(dir.files(), 15u);
  EXPECT_TRUE(JitModule::compile({kernel("k", 1.5f)}, o1, symbols())->from_cache());
  EXPECT_TRUE(JitModule::compile({kernel("k2", 1.5f)}, with_dir(dir), symbols())->from_cache());
}

TEST(CodegenDiskCache, CorruptObjectIsIgnoredAndRecompiled) {
  TempDir dir;
  auto first = JitModule::compile({kernel("k", 1.5f)}, with_dir(dir), symbols());
  std::vector<float> expected = run(*first, "k");
  for (const auto& e : fs::directory_iterator(dir.path)) {
    if (e.path().extension() != ".o") continue;
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(e.path()) / 2));
    f.write("\xde\xad\xbe\xef\xde\xad\xbe\xef", 8);
  }
  auto second = JitModule::compile({kernel("k", 1.5f)}, with_dir(dir), symbols());
  EXPECT_FALSE(second->from_cache());
  EXPECT_EQ(run(*second, "k"), expected);
  // The entry was rewritten: the next compile is a hit again.
  EXPECT_TRUE(JitModule::compile({kernel("k", 1.5f)}, with_dir(dir), symbols())->from_cache());
  // A truncated object too.
  for (const auto& e : fs::directory_iterator(dir.path))
    if (e.path().extension() == ".o") fs::resize_file(e.path(), 100);
  auto third = JitModule::compile({kernel("k", 1.5f)}, with_dir(dir), symbols());
  EXPECT_FALSE(third->from_cache());
  EXPECT_EQ(run(*third, "k"), expected);
}

TEST(CodegenDiskCache, DisabledCacheNeverWrites) {
  TempDir dir;
  codegen::TargetOptions o = with_dir(dir);
  o.use_disk_cache = false;
  auto m = JitModule::compile({kernel("k", 1.5f)}, o, symbols());
  EXPECT_FALSE(m->from_cache());
  EXPECT_EQ(m->cache_dir(), "");
  run(*m, "k");
  EXPECT_EQ(dir.files(), 0u);
  // KILN_CACHE_DIR=off disables the default directory.
  const char* old = std::getenv("KILN_CACHE_DIR");
  std::string saved = old ? old : "";
  ::setenv("KILN_CACHE_DIR", "off", 1);
  auto m2 = JitModule::compile({kernel("k", 1.5f)}, codegen::TargetOptions{}, symbols());
  EXPECT_EQ(m2->cache_dir(), "");
  EXPECT_FALSE(m2->from_cache());
  if (old) ::setenv("KILN_CACHE_DIR", saved.c_str(), 1); else ::unsetenv("KILN_CACHE_DIR");
}

TEST(CodegenDiskCache, DirectoryIsBounded) {
  TempDir dir;
  fs::create_directories(dir.path);
  // Entries are pruned least recently used first: in a cache bounded to about one entry (1000
  // bytes of object plus the key file) only the newest of two remains.
  codegen::DiskCache cache(dir.path.string(), 1500);
  cache.store("key one", {std::string(1000, 'a'), "ir one"});
  ASSERT_TRUE(cache.load("key one"));
  EXPECT_EQ(cache.load("key one")->object, std::string(1000, 'a'));
  EXPECT_EQ(cache.load("key one")->ir, "ir one");
  EXPECT_FALSE(cache.load("key two"));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  cache.store("key two", {std::string(1000, 'b'), "ir two"});
  EXPECT_FALSE(cache.load("key one"));
  ASSERT_TRUE(cache.load("key two"));
  EXPECT_EQ(cache.load("key two")->object, std::string(1000, 'b'));
  EXPECT_EQ(dir.files(), 3u);
}

}  // namespace
}  // namespace kiln
