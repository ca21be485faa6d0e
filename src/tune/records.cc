// Tuning records as JSON lines, and the best choice per task for one target (see records.h).
#include "tune/records.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "runtime/thread_pool.h"
#include "target/target.h"

namespace kiln::tune {

using nlohmann::json;

std::string TargetKey::describe() const {
  return cpu + " / " + isa + " / " + std::to_string(threads) + (threads == 1 ? " thread" : " threads");
}

TargetKey host_target(int threads) {
  const target::Target& t = target::Target::host();
  return {t.cpu_name.empty() ? "unknown" : t.cpu_name, target::isa_name(t.isa), threads};
}

const char* status_name(Status s) {
  switch (s) {
    case Status::kOk: return "ok";
    case Status::kWrong: return "wrong";
    case Status::kCrashed: return "crashed";
    case Status::kTimeout: return "timeout";
    case Status::kError: return "error";
  }
  return "error";
}

namespace {

bool parse_status(const std::string& s, Status* out) {
  for (Status v : {Status::kOk, Status::kWrong, Status::kCrashed, Status::kTimeout, Status::kError})
    if (s == status_name(v)) {
      *out = v;
      return true;
    }
  return false;
}

constexpr const char* kOffloadKeyPrefix = "Offload ";  // offload records' keys: the prefix, then the fingerprint

Record record_from_json(const json& j) {
  Record r;
  r.key = j.at("key").get<std::string>();
  const std::string choice = j.at("choice").get<std::string>();
  if (!gemm_ops::parse_kernel_choice(choice, &r.choice)) throw std::invalid_argument("unknown choice '" + choice + "'");
  const json& t = j.at("target");
  r.target.cpu = t.at("cpu").get<std::string>();
  r.target.isa = t.at("isa").get<std::string>();
  r.target.threads = t.at("threads").get<int>();
  if (!parse_status(j.at("status").get<std::string>(), &r.status))
    throw std::invalid_argument("unknown status '" + j.at("status").get<std::string>() + "'");
  r.time_us = j.value("time_us", 0.0);
  r.detail = j.value("detail", std::string());
  r.model = j.value("model", std::string());
  r.kiln_version = j.value("kiln", std::string());
  r.offload = j.value("offload", std::string());
  if (r.status == Status::kOk && !(r.time_us > 0)) throw std::invalid_argument("an ok record needs time_us > 0");
  return r;
}

}  // namespace

std::string to_json_line(const Record& r) {
  json j = {{"key", r.key},
            {"choice", gemm_ops::to_string(r.choice)},
            {"target", {{"cpu", r.target.cpu}, {"isa", r.target.isa}, {"threads", r.target.threads}}},
            {"status", status_name(r.status)}};
  if (r.status == Status::kOk) j["time_us"] = r.time_us;
  if (!r.detail.empty()) j["detail"] = r.detail;
  if (!r.model.empty()) j["model"] = r.model;
  if (r.key.rfind(kOffloadKeyPrefix, 0) == 0) j["offload"] = r.offload;
  j["kiln"] = r.kiln_version.empty() ? std::string(KILN_VERSION) : r.kiln_version;
  return j.dump();
}

std::vector<Record> read_records(const std::string& path, bool missing_ok) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    std::vector<std::string> files;
    for (const auto& e : std::filesystem::directory_iterator(path, ec))
      if (e.is_regular_file(ec) && e.path().extension() == ".jsonl") files.push_back(e.path().string());
    if (ec) throw Error(ErrorKind::kBadInput, path + ": cannot list the tuning records directory: " + ec.message());
    std::sort(files.begin(), files.end());
    std::vector<Record> all;
    for (const std::string& f : files) {
      std::vector<Record> part = read_records(f);
      all.insert(all.end(), part.begin(), part.end());
    }
    return all;
  }
  std::ifstream in(path);
  if (!in) {
    if (missing_ok) return {};
    throw Error(ErrorKind::kBadInput, path + ": cannot open the tuning records");
  }
  std::vector<Record> out;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      out.push_back(record_from_json(json::parse(line)));
    } catch (const std::exception& e) {
      throw Error(ErrorKind::kBadInput, path + ":" + std::to_string(n) + ": not a tuning record (" + e.what() + ")");
    }
  }
  return out;
}

void append_records(const std::string& path, const std::vector<Record>& records) {
  std::ofstream out(path, std::ios::app);
  if (!out) throw Error(ErrorKind::kBadInput, path + ": cannot write the tuning records");
  for (const Record& r : records) out << to_json_line(r) << "\n" << std::flush;
  if (!out) throw Error(ErrorKind::kBadInput, path + ": writing the tuning records failed");
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

std::map<std::string, TaskRecords> summarize(const std::vector<Record>& records, const TargetKey& target,
                                             int64_t* other, std::string* other_target) {
  // Per task, per choice (in first-seen order): its ok times.
  std::map<std::string, std::vector<std::pair<std::string, std::vector<double>>>> times;
  std::map<std::string, TaskRecords> out;
  for (const Record& r : records) {
    if (!(r.target == target)) {
      if (other) ++*other;
      if (other_target && other_target->empty()) *other_target = r.target.describe();
      continue;
    }
    TaskRecords& t = out[r.key];
    ++t.measured;
    if (r.status != Status::kOk) {
      ++t.invalid;
      continue;
    }
    auto& list = times[r.key];
    const std::string c = gemm_ops::to_string(r.choice);
    auto it = std::find_if(list.begin(), list.end(), [&](const auto& e) { return e.first == c; });
    if (it == list.end()) it = list.insert(list.end(), {c, {}});
    it->second.push_back(r.time_us);
  }
  for (auto& [key, list] : times) {
    TaskRecords& t = out[key];
    for (const auto& [choice, v] : list) {
      const double m = median(v);
      if (choice == "default") t.default_us = m;
      if (t.best_us == 0 || m < t.best_us) {
        t.best_us = m;
        gemm_ops::parse_kernel_choice(choice, &t.best);
      }
    }
  }
  return out;
}

gemm_ops::KernelChoice applied_choice(const TaskRecords& t) {
  const bool clear_gain = t.best_us > 0 && (t.default_us == 0 || t.best_us <= 0.98 * t.default_us);
  return clear_gain ? t.best : gemm_ops::KernelChoice{};
}

TuningTable best_choices(const std::vector<Record>& records, const TargetKey& target, std::string* note) {
  int64_t other = 0;
  std::string other_target;
  TuningTable table;
  for (const auto& [key, t] : summarize(records, target, &other, &other_target))
    if (const gemm_ops::KernelChoice c = applied_choice(t); !c.is_default()) table[key] = c;
  if (note)
    *note = other == 0 ? "" : std::to_string(other) + " of " + std::to_string(records.size()) +
                                  " records are for another CPU or thread count (e.g. " + other_target +
                                  ", this is " + target.describe() + ") and were ignored";
  return table;
}

std::shared_ptr<const TuningTable> load_tuning(const std::string& path, int threads) {
  if (path.empty()) return nullptr;
  std::string note;
  const int t = threads > 0 ? threads : ThreadPool::default_threads();
  auto table = std::make_shared<TuningTable>(best_choices(read_records(path), host_target(t), &note));
  if (!note.empty()) std::cerr << "kiln: records: " << note << "\n";
  return table;
}

std::string offload_key(const std::string& fingerprint) { return kOffloadKeyPrefix + fingerprint; }

OffloadTable best_offload(const std::vector<Record>& records, const TargetKey& target) {
  const std::string prefix = kOffloadKeyPrefix;
  std::map<std::string, std::map<std::string, std::vector<double>>> times;  // fingerprint -> offload -> ok times
  for (const Record& r : records)
    if (r.key.rfind(prefix, 0) == 0 && r.target == target && r.status == Status::kOk)
      times[r.key.substr(prefix.size())][r.offload].push_back(r.time_us);
  OffloadTable table;
  for (const auto& [fingerprint, by_offload] : times) {
    auto own = by_offload.find("");
    if (own == by_offload.end()) continue;  // nothing to compare with
    const double own_us = median(own->second);
    double best_us = own_us;
    for (const auto& [offload, us] : by_offload) {
      const double m = median(us);
      if (!offload.empty() && m <= 0.98 * own_us && m < best_us) {  // the same margin as kernel choices
        best_us = m;
        table[fingerprint] = offload;
      }
    }
  }
  return table;
}

std::shared_ptr<const OffloadTable> load_offload_choices(const std::string& path, int threads) {
  if (path.empty()) return nullptr;
  const int t = threads > 0 ? threads : ThreadPool::default_threads();
  return std::make_shared<OffloadTable>(best_offload(read_records(path), host_target(t)));
}

}  // namespace kiln::tune
