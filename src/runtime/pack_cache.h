// Packed constant weights shared across plans: every input-shape signature of a model (and every
// model loaded on the same constant) gets its own plan and GEMM ops, but a constant packed the
// same way is packed once and held once, so a new signature repacks nothing and memory stays
// flat as signatures come and go. Entries keep their source tensor alive while the packed copy
// lives (so its address cannot be reused by another tensor) and are dropped when it is freed.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "core/tensor.h"

namespace kiln {

template <typename Packed>
class PackCache {
 public:
  static PackCache& global() {
    static PackCache cache;
    return cache;
  }

  // The packed form of `source` for the packing described by `how` (transposition, dims,
  // layout): `make()` runs only when no live plan holds one.
  // Packed copies alive now (tests).
  size_t live() {
    std::lock_guard<std::mutex> lk(mu_);
    size_t n = 0;
    for (const auto& [key, e] : entries_) n += !e.packed.expired();
    return n;
  }

  template <typename MakeFn>
  std::shared_ptr<const Packed> get(const Tensor& source, const std::string& how, MakeFn make) {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto it = entries_.begin(); it != entries_.end();) it = it->second.packed.expired() ? entries_.erase(it) : std::next(it);
    const Key key{source.raw(), how};
    auto it = entries_.find(key);
    if (it != entries_.end())
      if (std::shared_ptr<const Packed> p = it->second.packed.lock()) return p;
    auto p = std::make_shared<const Packed>(make());
    entries_[key] = Entry{source, p};
    return p;
  }

 private:
  using Key = std::pair<const void*, std::string>;
  struct Entry {
    Tensor source;  // shares the constant's storage: its address stays this constant's
    std::weak_ptr<const Packed> packed;
  };
  std::mutex mu_;
  std::map<Key, Entry> entries_;
};

}  // namespace kiln
