// Tuning records (tune/records.h): JSON lines round trip, malformed lines named by file and
// line, the best choice per task (medians, the 2% margin over the default, other CPUs' records
// ignored with a note), and CompiledExecutor::retune applying a table to a planned model.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>

#include "core/error.h"
#include "driver/compiled_executor.h"
#include "driver/offload.h"
#include "driver/session.h"
#include "ir/text.h"
#include "pass/pass.h"
#include "tune/records.h"
#include "../common/engines_agree.h"
#include "../common/random_const.h"

namespace kiln::tune {
namespace {

Record rec(const std::string& key, const std::string& choice, double us, Status s = Status::kOk, int threads = 1) {
  Record r;
  r.key = key;
  EXPECT_TRUE(gemm_ops::parse_kernel_choice(choice, &r.choice)) << choice;
  r.target = {"Test CPU", "avx2", threads};
  r.status = s;
  r.time_us = us;
  if (s != Status::kOk) r.detail = "crashed (signal 6)";
  r.model = "m.onnx";
  return r;
}

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "/kiln_records_" + name + "_" + std::to_string(::getpid()) + ".jsonl";
}

TEST(TuneRecords, JsonLinesRoundTrip) {
  const std::string path = temp_path("roundtrip");
  std::remove(path.c_str());
  const std::vector<Record> in = {rec("Conv k", "default", 100), rec("Conv k", "algo=gemm mr=12 split=2x1", 90),
                                  rec("Conv k", "algo=winograd4", 0, Status::kCrashed)};
  append_records(path, {in[0]});
  append_records(path, {in[1], in[2]});
  const std::vector<Record> out = read_records(path);
  ASSERT_EQ(out.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(out[i].key, in[i].key);
    EXPECT_EQ(out[i].choice, in[i].choice);
    EXPECT_EQ(out[i].target, in[i].target);
    EXPECT_EQ(out[i].status, in[i].status);
    EXPECT_EQ(out[i].detail, in[i].detail);
    EXPECT_EQ(out[i].model, "m.onnx");
    EXPECT_FALSE(out[i].kiln_version.empty());
  }
  EXPECT_DOUBLE_EQ(out[1].time_us, 90);
  std::remove(path.c_str());
  EXPECT_TRUE(read_records(path, true).empty());
  EXPECT_THROW(read_records(path), Error);
}

TEST(TuneRecords, MalformedLinesNameFileAndLine) {
  const std::string path = temp_path("bad");
  for (const char* bad : {"{not json", "{\"key\": \"k\"}", "[1, 2]",
                          R"({"key":"k","choice":"algo=fft","target":{"cpu":"c","isa":"avx2","threads":1},"status":"ok","time_us":1})",
                          R"({"key":"k","choice":"default","target":{"cpu":"c","isa":"avx2","threads":1},"status":"ok"})",
                          R"({"key":"k","choice":"default","target":{"cpu":"c","isa":"avx2","threads":1},"status":"maybe"})"}) {
    std::ofstream(path) << to_json_line(rec("Conv k", "default", 5)) << "\n\n" << bad << "\n";
    try {
      read_records(path);
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
      EXPECT_NE(std::string(e.what()).find(path + ":3: not a tuning record"), std::string::npos) << e.what();
    }
  }
  std::remove(path.c_str());
}

TEST(TuneRecords, BestChoicePerTask) {
  const TargetKey here{"Test CPU", "avx2", 1};
  std::vector<Record> rs = {
      // Task a: gemm's median (82) beats the default's (100); one fast outlier of winograd does not
      // make its median (120) the best; a crashed record never counts.
      rec("a", "default", 100), rec("a", "default", 104), rec("a", "default", 99),
      rec("a", "algo=gemm", 80), rec("a", "algo=gemm", 82),
      rec("a", "algo=winograd4", 50), rec("a", "algo=winograd4", 120), rec("a", "algo=winograd4", 130),
      rec("a", "algo=winograd2", 0, Status::kCrashed),
      // Task b: 1% faster than the default is within noise: the default stays.
      rec("b", "default", 100), rec("b", "algo=gemm mr=8", 99),
      // Task c: measured for 2 threads and another CPU only.
      rec("c", "algo=gemm", 10, Status::kOk, 2)};
  Record other = rec("c", "algo=gemm", 10);
  other.target.cpu = "Other CPU";
  rs.push_back(other);
  std::string note;
  const TuningTable t = best_choices(rs, here, &note);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(gemm_ops::to_string(t.at("a")), "algo=gemm");
  EXPECT_NE(note.find("2 of 13 records are for another CPU or thread count"), std::string::npos) << note;
  const auto s = summarize(rs, here);
  EXPECT_DOUBLE_EQ(s.at("a").default_us, 100);
  EXPECT_DOUBLE_EQ(s.at("a").best_us, 82);  // (of two, the upper median)
  EXPECT_EQ(s.at("a").invalid, 1);
  EXPECT_EQ(s.at("a").measured, 9);
  EXPECT_TRUE(best_choices(rs, {"Test CPU", "avx2", 2}).count("c"));
}

TEST(TuneRecords, RetuneAppliesATableWithoutRecompiling) {
  std::mt19937_64 rng(7);
  const std::string text = "graph @g(%x: f32[1,24,14,14]) -> (%y: f32[1,32,14,14]) {\n  %w = " +
                           test::rand_const({32, 24, 3, 3}, rng) +
                           "\n  %y = Conv(%x, %w) {pads=[1, 1, 1, 1]} : f32[1,32,14,14]\n  return %y\n}";
  Model m = parse_model(text);
  PassContext ctx;
  run_passes(m, {"shape-inference", "fusion", "fuse-epilogues"}, ctx);
  const std::vector<RtValue> feeds = test::random_feeds(m, 8);
  CompiledExecutor exec(m, {});
  const Tensor want = exec.run(feeds)[0].tensor.clone();
  EXPECT_EQ(exec.stats().tuned_gemms, 0);
  const std::string key = "Conv f32 x1x24x14x14 w32x24x3x3 s1x1 d1x1 p1x1x1x1 g1";
  for (const char* choice : {"algo=gemm-pixel-rows mr=8", "algo=winograd2", "algo=gemm split=2x2"}) {
    auto table = std::make_shared<TuningTable>();
    ASSERT_TRUE(gemm_ops::parse_kernel_choice(choice, &(*table)[key]));
    EXPECT_EQ(exec.retune(table), 1) << choice;
    EXPECT_EQ(exec.retune(table), 0) << choice;  // already applied
    const Tensor got = exec.run(feeds)[0].tensor;
    for (int64_t i = 0; i < got.numel(); ++i) ASSERT_NEAR(got.get_double(i), want.get_double(i), 1e-4) << choice;
    // A new executor with the table in its options builds the same choice.
    CompiledOptions o;
    o.tuning = table;
    CompiledExecutor fresh(m, o);
    fresh.run(feeds);
    EXPECT_EQ(fresh.stats().tuned_gemms, 1);
  }
  EXPECT_EQ(exec.retune(nullptr), 1);  // back to the default rules
}


// Offload records: the model's run on kiln's kernels and with each backend; the fastest applies
// when it is at least 2% under kiln's own, for this target only.
TEST(Records, OffloadChoiceNeedsATwoPercentGain) {
  auto off = [](const std::string& offload, double us, int threads = 1, Status s = Status::kOk) {
    Record r = rec(offload_key("f00d"), "default", us, s, threads);
    r.offload = offload;
    return r;
  };
  const TargetKey here{"Test CPU", "avx2", 1};
  EXPECT_TRUE(best_offload({off("", 100), off("dnnl", 99)}, here).empty());
  const OffloadTable t = best_offload({off("", 100), off("dnnl", 95), off("dnnl", 94), off("dnnl", 200)}, here);
  ASSERT_EQ(t.count("f00d"), 1u);
  EXPECT_EQ(t.at("f00d"), "dnnl");
  EXPECT_TRUE(best_offload({off("dnnl", 50)}, here).empty());  // kiln's own not measured
  EXPECT_TRUE(best_offload({off("", 100), off("dnnl", 50, 2)}, here).empty());  // another thread count
  EXPECT_TRUE(best_offload({off("", 100), off("dnnl", 50, 1, Status::kCrashed)}, here).empty());
  // The field survives the JSON line.
  const std::string path = temp_path("offload");
  std::remove(path.c_str());
  append_records(path, {off("dnnl", 95)});
  const Record back = read_records(path).at(0);
  std::remove(path.c_str());
  EXPECT_EQ(back.offload, "dnnl");
  EXPECT_EQ(back.key, "Offload f00d");
}

// A session given an offload table runs the model the way it says for its fingerprint only.
TEST(Records, SessionAppliesTheRecordedOffload) {
  register_builtin_backends();
  if (!ext::find_backend("dnnl")) GTEST_SKIP() << "built without oneDNN";
  const std::string text = R"(graph @main(%x: f32[1,4,6,6]) -> (%y: ?[...]) {
  %w = const f32[4,4,1,1] [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]
  %c = Conv(%x, %w)
  %y = Relu(%c)
  return %y
})";
  for (const bool matching : {true, false}) {
    Model m = parse_model(text);
    auto table = std::make_shared<OffloadTable>();
    (*table)[matching ? model_fingerprint(m) : "0000000000000000"] = "dnnl";
    SessionOptions so;
    so.engine = Engine::kCompiled;
    so.tuned_offload = table;
    Session s(std::move(m), so);
    s.run(test::random_feeds(s.model(), 3));
    EXPECT_EQ(s.compiled()->stats().external_regions, matching ? 1 : 0);
  }
}
}  // namespace
}  // namespace kiln::tune
