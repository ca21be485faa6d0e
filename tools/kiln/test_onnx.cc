// `kiln test-onnx DIR...`: runs ONNX backend-test folders, one line per failing or skipped
// case, then "N passed, M failed, K skipped". Each case runs in a forked child with a time
// limit so that a crash or hang in one case is reported as that case's failure.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include "commands.h"
#include "core/error.h"
#include "driver/conformance.h"
#include "driver/conformance_report.h"

namespace kiln::cli {
namespace {

struct TestArgs {
  std::vector<std::string> dirs;
  double timeout_s = 120;
  bool isolate = true;
  std::string expected;       // file listing cases that must pass
  std::string write_passing;  // write the passing cases here
  bool verbose = false;
  bool optimize = false;
  std::string engine = "interp";
  std::string report;  // Markdown conformance report
};

CaseResult run_isolated(const std::string& dir, double timeout_s, const CaseOptions& opts) {
  int fds[2];
  if (pipe(fds) != 0) return run_backend_case(dir, opts);
  std::cout.flush();
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return run_backend_case(dir, opts);
  }
  if (pid == 0) {
    close(fds[0]);
    CaseResult r = run_backend_case(dir, opts);
    std::string msg = std::to_string(static_cast<int>(r.status)) + " " + r.reason;
    ssize_t off = 0;
    while (off < static_cast<ssize_t>(msg.size())) {
      ssize_t w = write(fds[1], msg.data() + off, msg.size() - static_cast<size_t>(off));
      if (w <= 0) break;
      off += w;
    }
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  bool timed_out = false;
  char buf[4096];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int pr = poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (pr < 0 && errno != EINTR) break;
    if (pr <= 0) continue;
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    msg.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  CaseResult r;
  if (timed_out) {
    r.status = CaseResult::Status::kFailed;
    r.reason = "timed out after " + std::to_string(static_cast<int>(timeout_s)) + " s";
  } else if (WIFSIGNALED(status)) {
    r.status = CaseResult::Status::kFailed;
    r.reason = std::string("crashed: ") + strsignal(WTERMSIG(status));
  } else if (msg.empty()) {
    r.status = CaseResult::Status::kFailed;
    r.reason = "child exited without a result (status " + std::to_string(WEXITSTATUS(status)) + ")";
  } else {
    r.status = static_cast<CaseResult::Status>(msg[0] - '0');
    r.reason = msg.size() > 2 ? msg.substr(2) : "";
  }
  return r;
}

std::string case_name(const std::string& dir) {
  auto p = std::filesystem::path(dir);
  if (p.filename().empty()) p = p.parent_path();
  return p.parent_path().filename().string() + "/" + p.filename().string();
}

int test_onnx_command(const TestArgs& a) {
  auto cases = collect_backend_cases(a.dirs);
  std::set<std::string> expected;
  if (!a.expected.empty()) {
    std::ifstream in(a.expected);
    if (!in) throw Error(ErrorKind::kUsage, "cannot read expected-pass list '" + a.expected + "'");
    for (std::string line; std::getline(in, line);)
      if (!line.empty() && line[0] != '#') expected.insert(line);
  }
  ConformanceReport report;
  int passed = 0, failed = 0, skipped = 0;
  std::vector<std::string> passing, regressions;
  for (const auto& dir : cases) {
    std::string name = case_name(dir);
    CaseOptions copts;
    copts.optimize = a.optimize;
    copts.engine = parse_engine(a.engine);
    CaseResult r = a.isolate ? run_isolated(dir, a.timeout_s, copts) : run_backend_case(dir, copts);
    if (!a.report.empty()) report.add(dir, name, r);
    switch (r.status) {
      case CaseResult::Status::kPassed:
        ++passed;
        passing.push_back(name);
        if (a.verbose) std::cout << "PASS " << name << "\n";
        break;
      case CaseResult::Status::kFailed:
        ++failed;
        std::cout << "FAIL " << name << ": " << r.reason << "\n";
        if (expected.count(name)) regressions.push_back(name);
        break;
      case CaseResult::Status::kSkipped:
        ++skipped;
        std::cout << "SKIP " << name << ": " << r.reason << "\n";
        if (expected.count(name)) regressions.push_back(name);
        break;
    }
    std::cout.flush();
  }
  if (!a.write_passing.empty()) {
    std::ofstream out(a.write_passing);
    out << "# cases that pass with the interpreter; regenerate with kiln test-onnx --write-passing\n";
    for (const auto& p : passing) out << p << "\n";
  }
  if (!expected.empty()) {
    for (const auto& r : regressions) std::cout << "REGRESSION " << r << " (in " << a.expected << ")\n";
    std::cout << "expected-pass list: " << expected.size() << " cases, " << regressions.size() << " regressed\n";
  }
  if (!a.report.empty()) report.write(a.report, a.dirs, a.optimize);
  std::cout << passed << " passed, " << failed << " failed, " << skipped << " skipped\n";
  if (!a.expected.empty()) return regressions.empty() ? 0 : 1;
  return failed == 0 ? 0 : 1;
}

}  // namespace

void add_test_onnx_command(CLI::App& app, Action& action) {
  auto args = std::make_shared<TestArgs>();
  CLI::App* cmd = app.add_subcommand("test-onnx", "Run ONNX backend-test folders and compare outputs");
  cmd->add_option("dirs", args->dirs, "case folders (with model.onnx) or folders of cases")->required();
  cmd->add_option("--timeout", args->timeout_s, "seconds per case before it counts as failed")->capture_default_str();
  cmd->add_flag("!--no-isolate", args->isolate, "run cases in-process instead of one forked child each");
  cmd->add_option("--expected", args->expected,
                  "file of case names that must pass; exit 1 only when one of them does not");
  cmd->add_option("--write-passing", args->write_passing, "write the names of passing cases to FILE");
  cmd->add_flag("-v,--verbose", args->verbose, "also print passing cases");
  cmd->add_flag("--optimize", args->optimize, "run the default graph-pass pipeline before interpreting");
  cmd->add_option("--engine", args->engine, "interp (reference interpreter) or compiled")->capture_default_str();
  cmd->add_option("--report", args->report,
                  "write a Markdown report: per-op pass counts and every failing or skipped case");
  cmd->callback([args, &action] { action = [args] { return test_onnx_command(*args); }; });
}

}  // namespace kiln::cli
