// Run scopes and the cancellation / deadline check (core/run_control.h).
#include "core/run_control.h"

#include <cstdio>

#include "core/error.h"

namespace kiln {
namespace {
thread_local RunScope* t_scope = nullptr;
}

RunScope::RunScope(const Canceller* canceller, double timeout_s)
    : canceller_(canceller),
      generation_(canceller ? canceller->generation() : 0),
      timeout_s_(timeout_s),
      outer_(t_scope) {
  if (timeout_s > 0)
    deadline_ = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(timeout_s));
  t_scope = this;
}

RunScope::~RunScope() { t_scope = outer_; }

void check_run() {
  const RunScope* s = t_scope;
  if (!s) return;
  if (s->canceller_ && s->canceller_->generation() != s->generation_)
    throw Error(ErrorKind::kCancelled, "the run was cancelled");
  if (s->timeout_s_ > 0 && std::chrono::steady_clock::now() >= s->deadline_) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g s", s->timeout_s_);
    throw Error(ErrorKind::kTimeout, std::string("the run took longer than its timeout of ") + buf);
  }
}

}  // namespace kiln
