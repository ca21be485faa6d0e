// The on-disk compilation cache of codegen/llvm: relocatable objects of whole modules, keyed by
// the printed TIR of every kernel, the target options, the host CPU, the LLVM version and the
// cache format version. An entry is `<16 hex digits>.o` (the object), `<hex>.ll` (the optimized
// IR text, for JitModule::llvm_ir) and `<hex>.key` (the full key text, then the size and FNV-1a
// hash of both): a key text that differs (a hash collision) or a file that does not match its
// size and hash is a miss. Files are written to
// a temporary name and renamed; the directory is bounded by dropping the least recently used
// entries on write. Internal to the layer; names no LLVM type.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "codegen/llvm/codegen.h"

namespace kiln::codegen {

uint64_t fnv1a64(const std::string& s);

// The cache directory for `target`: target.cache_dir, else $KILN_CACHE_DIR, else
// $XDG_CACHE_HOME/kiln, else ~/.cache/kiln; "" when disabled (use_disk_cache false,
// KILN_CACHE_DIR=off, or a directory that cannot be created).
std::string disk_cache_dir(const TargetOptions& target);

// The key text; `resolved` describes the resolved target (triple, cpu, features, vector math).
std::string disk_cache_key(const std::vector<tir::PrimFunc>& funcs, const TargetOptions& target,
                           const std::string& resolved);

class DiskCache {
 public:
  static constexpr uint64_t kDefaultMaxBytes = 512ull << 20;
  explicit DiskCache(std::string dir, uint64_t max_bytes = kDefaultMaxBytes);
  struct Entry {
    std::string object;  // relocatable object file
    std::string ir;      // optimized LLVM IR text
  };
  // The entry stored for `key`, or nullopt (absent, unreadable, collided or corrupt).
  std::optional<Entry> load(const std::string& key) const;
  // Stores the entry (best effort: I/O errors are ignored), then bounds the directory.
  void store(const std::string& key, const Entry& entry) const;
  std::string object_path(const std::string& key) const;
  const std::string& dir() const { return dir_; }

 private:
  std::string base(const std::string& key) const;
  void prune() const;
  std::string dir_;
  uint64_t max_bytes_;
};

}  // namespace kiln::codegen
