// The oneDNN backend as an ext::Backend (see dnnl_backend.h).
#include "external/dnnl/dnnl_backend.h"

#include <atomic>

#include "external/dnnl/dnnl_gomp.h"
#include "external/dnnl/dnnl_steps.h"

namespace kiln::external {
namespace {

struct TeamJob {
  int64_t n;
  void (*body)(int64_t, void*);
  void* ctx;
  std::atomic<int64_t> next{0};
};

void team_member(void* p) {
  auto* job = static_cast<TeamJob*>(p);
  for (int64_t i; (i = job->next.fetch_add(1, std::memory_order_relaxed)) < job->n;) job->body(i, job->ctx);
}

// kiln's parallel loops on oneDNN's OpenMP team (Backend::thread_team): the same threads, so
// kiln's kernels between regions and oneDNN's primitives never oversubscribe the cores. Each
// member of the team takes the next chunk until none is left.
void omp_team(int64_t n, int threads, void (*body)(int64_t, void*), void* ctx) {
  TeamJob job{n, body, ctx};
  GOMP_parallel(team_member, &job, static_cast<unsigned>(threads), 0);
}

class DnnlBackend : public ext::Backend {
 public:
  std::string name() const override { return "dnnl"; }
  bool supports(const ext::Region& r, const ext::Node& n) const override { return dnnl_backend::supported(r, n); }
  // The fusions oneDNN's post-ops take: kept in one region so that codegen can fuse them.
  std::vector<ext::Composite> composites() const override {
    return {{"conv_add_relu", {"Conv", "Add", "Relu"}},
            {"conv_relu", {"Conv", "Relu"}},
            {"conv_clip", {"Conv", "Clip"}},
            {"matmul_bias_gelu", {"MatMul", "Add", "kiln::Gelu"}},
            {"matmul_bias", {"MatMul", "Add"}},
            {"gemm_relu", {"Gemm", "Relu"}}};
  }
  std::string codegen(const ext::Region& region) const override {
    return dnnl_backend::save_steps(dnnl_backend::lower_region(region));
  }
  std::unique_ptr<ext::RuntimeModule> load(const std::string& artifact, const ext::Region& region,
                                           const ext::ModuleOptions& options) const override {
    return dnnl_backend::make_module(dnnl_backend::load_steps(artifact), region, options.threads);
  }
  ext::ParallelFor thread_team() const override { return omp_team; }
};

}  // namespace

std::shared_ptr<const ext::Backend> make_dnnl_backend() { return std::make_shared<DnnlBackend>(); }

}  // namespace kiln::external
