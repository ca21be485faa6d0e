#include "codegen/llvm/disk_cache.h"

#include <unistd.h>

#include "codegen_revision.h"  // KILN_CODEGEN_REVISION (generated, src/CMakeLists.txt)

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <llvm/Config/llvm-config.h>

#include "tir/printer.h"

namespace kiln::codegen {

namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "kiln-disk-cache 1";

std::string hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return ss.str();
}

// Writes `data` to a temporary file in the same directory and renames it over `path`.
bool write_atomic(const std::string& path, const std::string& data) {
  static std::atomic<uint64_t> counter{0};
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return false;
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    out.flush();
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      return false;
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) fs::remove(tmp, ec);
  return !ec;
}

std::string trailer(const DiskCache::Entry& e) {
  return "object " + std::to_string(e.object.size()) + " " + hex(fnv1a64(e.object)) + "\nir " +
         std::to_string(e.ir.size()) + " " + hex(fnv1a64(e.ir)) + "\n";
}

}  // namespace

uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string disk_cache_dir(const TargetOptions& target) {
  if (!target.use_disk_cache) return "";
  std::string dir = target.cache_dir;
  if (dir.empty()) {
    const char* env = std::getenv("KILN_CACHE_DIR");
    if (env && *env) {
      dir = env;
    } else if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
      dir = std::string(xdg) + "/kiln";
    } else if (const char* home = std::getenv("HOME"); home && *home) {
      dir = std::string(home) + "/.cache/kiln";
    }
  }
  if (dir.empty() || dir == "off") return "";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec)) return "";
  return dir;
}

std::string disk_cache_key(const std::vector<tir::PrimFunc>& funcs, const TargetOptions& target,
                           const std::string& resolved) {
  std::string k = std::string(kFormat) + "\ncodegen " KILN_CODEGEN_REVISION "\nllvm " LLVM_VERSION_STRING
                  "\nhost " + host_cpu_description() +
                  "\ntarget cpu=" + target.cpu + " features=" + target.features +
                  " opt=" + std::to_string(target.opt_level) + "\nresolved " + resolved + "\n";
  for (const tir::PrimFunc& f : funcs) k += "kernel " + f.name + "\n" + tir::print(f) + "\n";
  return k;
}

DiskCache::DiskCache(std::string dir, uint64_t max_bytes) : dir_(std::move(dir)), max_bytes_(max_bytes) {}

std::string DiskCache::base(const std::string& key) const { return dir_ + "/" + hex(fnv1a64(key)); }
std::string DiskCache::object_path(const std::string& key) const { return base(key) + ".o"; }

std::optional<DiskCache::Entry> DiskCache::load(const std::string& key) const {
  auto stored_key = read_file(base(key) + ".key");
  if (!stored_key || stored_key->compare(0, key.size(), key) != 0) return std::nullopt;
  auto object = read_file(base(key) + ".o");
  if (!object) return std::nullopt;
  auto ir = read_file(base(key) + ".ll");
  if (!ir) return std::nullopt;
  Entry e{std::move(*object), std::move(*ir)};
  if (*stored_key != key + trailer(e)) return std::nullopt;
  std::error_code ec;  // most recently used: keeps the entry when the directory is pruned
  fs::last_write_time(base(key) + ".key", fs::file_time_type::clock::now(), ec);
  return e;
}

void DiskCache::store(const std::string& key, const Entry& entry) const {
  // The key last: a reader that finds the new key also finds its files.
  if (!write_atomic(base(key) + ".o", entry.object)) return;
  if (!write_atomic(base(key) + ".ll", entry.ir)) return;
  if (!write_atomic(base(key) + ".key", key + trailer(entry))) return;
  prune();
}

void DiskCache::prune() const {
  struct Entry {
    fs::file_time_type time;
    std::string stem;
    uint64_t bytes = 0;
  };
  std::map<std::string, Entry> entries;  // stem -> entry
  uint64_t total = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    std::string ext = p.extension().string();
    if (ext != ".o" && ext != ".ll" && ext != ".key") continue;
    std::error_code e2;
    uint64_t size = it->file_size(e2);
    if (e2) continue;
    Entry& e = entries[p.stem().string()];
    e.stem = p.stem().string();
    e.bytes += size;
    if (ext == ".key") e.time = it->last_write_time(e2);
    total += size;
  }
  if (total <= max_bytes_) return;
  std::vector<Entry> order;
  for (auto& [stem, e] : entries) order.push_back(e);
  std::sort(order.begin(), order.end(), [](const Entry& a, const Entry& b) { return a.time < b.time; });
  for (const Entry& e : order) {
    if (total <= max_bytes_) break;
    std::error_code e2;
    fs::remove(dir_ + "/" + e.stem + ".key", e2);
    fs::remove(dir_ + "/" + e.stem + ".o", e2);
    fs::remove(dir_ + "/" + e.stem + ".ll", e2);
    total -= e.bytes;
  }
}

}  // namespace kiln::codegen
