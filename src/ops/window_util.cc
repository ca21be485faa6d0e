// Sliding-window geometry for conv and pooling ops (see window_util.h).
#include "ops/window_util.h"

#include <algorithm>

namespace kiln {

// Bound on sizes, strides, dilations and pads so that window arithmetic cannot overflow int64.
constexpr int64_t kMaxWindowValue = (int64_t{1} << 31) - 1;

int64_t product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

std::vector<int64_t> spatial_attr(const AttrReader& at, const std::string& name, int nsp,
                                  int64_t fill, int64_t min_value) {
  std::vector<int64_t> v = at.attr_ints(name);
  if (v.empty()) return std::vector<int64_t>(static_cast<size_t>(nsp), fill);
  if (static_cast<int>(v.size()) != nsp)
    at.fail(ErrorKind::kInvalidModel, "attribute '" + name + "' should have " +
                                          std::to_string(nsp) + " values (one per spatial dim), got " +
                                          std::to_string(v.size()));
  for (int64_t x : v)
    if (x < min_value || x > kMaxWindowValue)
      at.fail(ErrorKind::kInvalidModel, "attribute '" + name + "' values should be in [" +
                                            std::to_string(min_value) + ", 2^31), got " +
                                            std::to_string(x));
  return v;
}

Window resolve_window(const AttrReader& at, const std::vector<int64_t>& in_spatial,
                      const std::vector<int64_t>& kernel, bool ceil_mode) {
  Window w;
  w.nsp = static_cast<int>(in_spatial.size());
  const int nsp = w.nsp;
  w.in = in_spatial;
  w.kernel = kernel;
  if (static_cast<int>(kernel.size()) != nsp)
    at.fail(ErrorKind::kInvalidModel, "kernel has " + std::to_string(kernel.size()) +
                                          " spatial dims but the input has " + std::to_string(nsp));
  for (int64_t k : kernel)
    if (k <= 0 || k > kMaxWindowValue)
      at.fail(ErrorKind::kInvalidModel, "kernel sizes should be in [1, 2^31), got " + std::to_string(k));
  w.strides = spatial_attr(at, "strides", nsp, 1, 1);
  w.dilations = spatial_attr(at, "dilations", nsp, 1, 1);
  const std::string auto_pad = at.attr_string("auto_pad", "NOTSET");
  std::vector<int64_t> pads = at.attr_ints("pads");
  if (pads.empty()) pads.assign(static_cast<size_t>(2 * nsp), 0);
  if (static_cast<int>(pads.size()) != 2 * nsp)
    at.fail(ErrorKind::kInvalidModel, "attribute 'pads' should have " + std::to_string(2 * nsp) +
                                          " values, got " + std::to_string(pads.size()));
  for (int64_t p : pads)
    if (p < 0 || p > kMaxWindowValue)
      at.fail(ErrorKind::kInvalidModel, "pads should be in [0, 2^31), got " + std::to_string(p));
  w.pads = pads;
  w.out.assign(static_cast<size_t>(nsp), -1);
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  if (!same && auto_pad != "VALID" && auto_pad != "NOTSET" && !auto_pad.empty())
    at.fail(ErrorKind::kInvalidModel, "auto_pad should be NOTSET, SAME_UPPER, SAME_LOWER or VALID, "
                                      "got '" + auto_pad + "'");
  for (int i = 0; i < nsp; ++i) {
    const int64_t in = in_spatial[i], s = w.strides[i], ek = w.eff_kernel(i);
    if (same) {
      // SAME: output = ceil(in / stride); the padding needed for that is split across both ends.
      if (in < 0) continue;
      const int64_t out = (in + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (out - 1) * s + ek - in);
      const int64_t small = total / 2, large = total - small;
      w.pads[i] = auto_pad == "SAME_UPPER" ? small : large;
      w.pads[i + nsp] = auto_pad == "SAME_UPPER" ? large : small;
      w.out[i] = out;
      continue;
    }
    if (auto_pad == "VALID") w.pads[i] = w.pads[i + nsp] = 0;
    if (in < 0) continue;
    const int64_t span = in + w.pads[i] + w.pads[i + nsp] - ek;
    if (span < 0)
      at.fail(ErrorKind::kBadInput, "window of size " + std::to_string(ek) +
                                        " (dilated kernel) is larger than the padded input size " +
                                        std::to_string(in + w.pads[i] + w.pads[i + nsp]) +
                                        " in spatial dim " + std::to_string(i));
    int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    // The last window must start inside the input or the left padding (PyTorch/ORT rule).
    if (ceil_mode && (out - 1) * s >= in + w.pads[i]) --out;
    w.out[i] = out;
  }
  return w;
}

bool spatial_dims_of(const Type& t, std::vector<int64_t>* spatial) {
  if (t.kind != Type::Kind::kTensor || !t.shape || t.shape->rank() < 3) return false;
  spatial->clear();
  for (size_t i = 2; i < t.shape->rank(); ++i)
    spatial->push_back(t.shape->dims[i].known() ? t.shape->dims[i].value : -1);
  return true;
}

}  // namespace kiln
