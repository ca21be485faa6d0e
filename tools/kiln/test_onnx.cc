// `kiln test-onnx DIR...`: runs ONNX backend-test folders, one line per failing or skipped
// case, then "N passed, M failed, K skipped". Each case runs in a forked child with a time
// limit so that a crash or hang in one case is reported as that case's failure; --jobs runs
// several children at once.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
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
  int jobs = 1;  // cases run side by side (each in its own child)
  std::string expected;       // file listing cases that must pass
  std::string write_passing;  // write the passing cases here
  bool verbose = false;
  bool optimize = false;
  std::string engine = "interp";
  std::vector<std::string> offload;
  double offload_min_cost = -1;
  std::string report;  // Markdown conformance report
};

// One case running in a forked child: its result arrives on `fd` as "<status> <reason>".
struct RunningCase {
  size_t index = 0;
  pid_t pid = -1;
  int fd = -1;
  std::string msg;
  std::chrono::steady_clock::time_point deadline;
};

void write_result(int fd, const CaseResult& r) {
  std::string msg = std::to_string(static_cast<int>(r.status)) + " " + r.reason;
  ssize_t off = 0;
  while (off < static_cast<ssize_t>(msg.size())) {
    ssize_t w = write(fd, msg.data() + off, msg.size() - static_cast<size_t>(off));
    if (w <= 0) break;
    off += w;
  }
}

// Forks the case; when no child can be made it runs in-process and the result is returned.
std::optional<CaseResult> start_case(RunningCase& rc, const std::string& dir, double timeout_s,
                                     const CaseOptions& opts) {
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
    write_result(fds[1], run_backend_case(dir, opts));
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  rc.pid = pid;
  rc.fd = fds[0];
  rc.deadline = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(timeout_s));
  return std::nullopt;
}

CaseResult finish_case(RunningCase& rc, bool timed_out, double timeout_s) {
  close(rc.fd);
  if (timed_out) kill(rc.pid, SIGKILL);
  int status = 0;
  waitpid(rc.pid, &status, 0);
  CaseResult r;
  if (timed_out) {
    r.status = CaseResult::Status::kFailed;
    r.reason = "timed out after " + std::to_string(static_cast<int>(timeout_s)) + " s";
  } else if (WIFSIGNALED(status)) {
    r.status = CaseResult::Status::kFailed;
    r.reason = std::string("crashed: ") + strsignal(WTERMSIG(status));
  } else if (rc.msg.empty()) {
    r.status = CaseResult::Status::kFailed;
    r.reason = "child exited without a result (status " + std::to_string(WEXITSTATUS(status)) + ")";
  } else {
    r.status = static_cast<CaseResult::Status>(rc.msg[0] - '0');
    r.reason = rc.msg.size() > 2 ? rc.msg.substr(2) : "";
  }
  return r;
}

// Waits up to a second for output from the running cases; stores the results of those that ended
// (their pipe closed) or ran past their deadline and removes them from `running`.
void collect_finished(std::vector<RunningCase>& running, std::vector<std::optional<CaseResult>>& results,
                      double timeout_s) {
  const auto now = std::chrono::steady_clock::now();
  int64_t wait_ms = 1000;
  std::vector<pollfd> pfds;
  for (const auto& rc : running) {
    pfds.push_back({rc.fd, POLLIN, 0});
    wait_ms = std::min<int64_t>(
        wait_ms, std::chrono::duration_cast<std::chrono::milliseconds>(rc.deadline - now).count());
  }
  int pr = poll(pfds.data(), pfds.size(), static_cast<int>(std::max<int64_t>(wait_ms, 0)));
  if (pr < 0 && errno != EINTR) throw Error(ErrorKind::kInternal, std::string("poll: ") + strerror(errno));
  char buf[4096];
  for (size_t i = running.size(); i-- > 0;) {
    RunningCase& rc = running[i];
    bool ended = false;
    if (pr > 0 && (pfds[i].revents & (POLLIN | POLLHUP | POLLERR))) {
      ssize_t n = read(rc.fd, buf, sizeof buf);
      if (n > 0) rc.msg.append(buf, static_cast<size_t>(n));
      else if (n == 0 || errno != EINTR) ended = true;
    }
    const bool timed_out = !ended && std::chrono::steady_clock::now() >= rc.deadline;
    if (!ended && !timed_out) continue;
    results[rc.index] = finish_case(rc, timed_out, timeout_s);
    running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
  }
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
  CaseOptions copts;
  copts.optimize = a.optimize;
  copts.engine = parse_engine(a.engine);
  copts.offload = a.offload;
  copts.offload_min_cost = a.offload_min_cost;
  auto report_case = [&](const std::string& dir, const CaseResult& r) {
    const std::string name = case_name(dir);
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
  };
  // Up to --jobs children at a time; results are reported in case order.
  std::vector<std::optional<CaseResult>> results(cases.size());
  std::vector<RunningCase> running;
  size_t next_start = 0, next_report = 0;
  while (next_report < cases.size()) {
    while (next_start < cases.size() && static_cast<int>(running.size()) < a.jobs) {
      const size_t i = next_start++;
      if (!a.isolate) {
        results[i] = run_backend_case(cases[i], copts);
        continue;
      }
      RunningCase rc;
      rc.index = i;
      if (auto done = start_case(rc, cases[i], a.timeout_s, copts)) results[i] = std::move(*done);
      else running.push_back(std::move(rc));
    }
    if (!running.empty()) collect_finished(running, results, a.timeout_s);
    for (; next_report < cases.size() && results[next_report]; ++next_report)
      report_case(cases[next_report], *results[next_report]);
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
  cmd->add_option("-j,--jobs", args->jobs, "cases run side by side, each in its own child (not with --no-isolate)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_option("--expected", args->expected,
                  "file of case names that must pass; exit 1 only when one of them does not");
  cmd->add_option("--write-passing", args->write_passing, "write the names of passing cases to FILE");
  cmd->add_flag("-v,--verbose", args->verbose, "also print passing cases");
  cmd->add_flag("--optimize", args->optimize, "run the default graph-pass pipeline before interpreting");
  cmd->add_option("--engine", args->engine, "interp (reference interpreter) or compiled")->capture_default_str();
  add_offload_option(cmd, args->offload);
  add_offload_min_cost_option(cmd, args->offload_min_cost);
  cmd->add_option("--report", args->report,
                  "write a Markdown report: per-op pass counts and every failing or skipped case");
  cmd->callback([args, &action] { action = [args] { return test_onnx_command(*args); }; });
}

}  // namespace kiln::cli
