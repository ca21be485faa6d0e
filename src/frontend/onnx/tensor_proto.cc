// TensorProto decoding: every typed field, little-endian raw_data, and external data files that
// must stay inside the model's folder.
#include "frontend/onnx/tensor_proto.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/error.h"

namespace kiln {
namespace {

[[noreturn]] void bad(const std::string& what, const std::string& msg) {
  throw Error(ErrorKind::kInvalidModel, "tensor '" + what + "': " + msg);
}

// External data: reads `length` bytes at `offset` of `location`, relative to base_dir.
std::string read_external(const onnx::TensorProto& p, const std::string& base_dir,
                          const std::string& what, size_t expected) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : p.external_data()) {
    try {
      if (kv.key() == "location") location = kv.value();
      else if (kv.key() == "offset") offset = std::stoll(kv.value());
      else if (kv.key() == "length") length = std::stoll(kv.value());
    } catch (const std::exception&) {
      bad(what, "external_data '" + kv.key() + "' is not a number: '" + kv.value() + "'");
    }
  }
  if (location.empty()) bad(what, "external data without a 'location'");
  namespace fs = std::filesystem;
  fs::path rel(location);
  if (rel.is_absolute()) bad(what, "external data location '" + location + "' must be relative to the model");
  for (const auto& part : rel)
    if (part == "..") bad(what, "external data location '" + location + "' escapes the model's folder");
  if (offset < 0) bad(what, "negative external data offset");
  fs::path full = fs::path(base_dir.empty() ? "." : base_dir) / rel;
  std::error_code ec;
  auto file_size = fs::file_size(full, ec);
  if (ec) bad(what, "cannot open external data file '" + full.string() + "'");
  if (length < 0) length = static_cast<int64_t>(expected);
  if (static_cast<size_t>(length) != expected)
    bad(what, "external data length " + std::to_string(length) + " does not match the " +
                  std::to_string(expected) + " bytes its shape needs");
  if (static_cast<uint64_t>(offset) + static_cast<uint64_t>(length) > file_size)
    bad(what, "external data range [" + std::to_string(offset) + ", +" + std::to_string(length) +
                  ") is past the end of '" + full.string() + "' (" + std::to_string(file_size) + " bytes)");
  std::ifstream in(full, std::ios::binary);
  std::string out(static_cast<size_t>(length), '\0');
  in.seekg(offset);
  in.read(out.data(), length);
  if (!in) bad(what, "failed reading external data from '" + full.string() + "'");
  return out;
}

// Sub-byte types (4- and 2-bit) are packed low bits first, ceil(n * bits / 8) bytes, whether in
// raw_data, external data or int32_data (one packed byte per entry); in memory one element per
// byte: int4/int2 sign-extended, uint4/uint2 and float4e2m1 as their raw code.
int64_t packed_bytes(DType dt, int64_t n) {
  const int bits = dtype_packed_bits(dt);
  if (!bits) return n * static_cast<int64_t>(dtype_size(dt));
  const int64_t per_byte = 8 / bits;
  return n / per_byte + (n % per_byte != 0);
}

template <class Bytes>
void unpack_sub_byte(const Bytes& packed, DType dt, int64_t n, Tensor& t) {
  const int bits = dtype_packed_bits(dt);
  const int per_byte = 8 / bits, mask = (1 << bits) - 1;
  const bool sign = dt == DType::kInt4 || dt == DType::kInt2;
  for (int64_t i = 0; i < n; ++i) {
    const auto byte = static_cast<uint8_t>(packed(i / per_byte));
    int v = (byte >> (bits * (i % per_byte))) & mask;
    if (sign && v >= (1 << (bits - 1))) v -= 1 << bits;
    t.data<uint8_t>()[i] = static_cast<uint8_t>(v);
  }
}

std::string pack_sub_byte(const Tensor& t) {
  const int bits = dtype_packed_bits(t.dtype());
  const int per_byte = 8 / bits, mask = (1 << bits) - 1;
  std::string out(static_cast<size_t>(packed_bytes(t.dtype(), t.numel())), '\0');
  for (int64_t i = 0; i < t.numel(); ++i)
    out[static_cast<size_t>(i / per_byte)] = static_cast<char>(
        static_cast<uint8_t>(out[static_cast<size_t>(i / per_byte)]) |
        ((t.data<uint8_t>()[i] & mask) << (bits * (i % per_byte))));
  return out;
}

template <class Field>
void check_count(const Field& f, int64_t numel, const std::string& what, const char* field) {
  if (static_cast<int64_t>(f.size()) != numel)
    bad(what, std::string(field) + " has " + std::to_string(f.size()) + " values, but the shape needs " +
                  std::to_string(numel));
}

// Checks the typed field that holds `dt`'s values against `n` elements, before anything is allocated
// (a tiny file must not make the importer allocate a huge tensor).
void check_typed_count(const onnx::TensorProto& p, DType dt, int64_t n, const std::string& what) {
  switch (dt) {
    case DType::kFloat32: return check_count(p.float_data(), n, what, "float_data");
    case DType::kFloat64: return check_count(p.double_data(), n, what, "double_data");
    case DType::kInt64: return check_count(p.int64_data(), n, what, "int64_data");
    case DType::kUInt32: case DType::kUInt64: return check_count(p.uint64_data(), n, what, "uint64_data");
    case DType::kUInt4: case DType::kInt4: case DType::kFloat4E2M1:
    case DType::kUInt2: case DType::kInt2:
      if (static_cast<int64_t>(p.int32_data().size()) != packed_bytes(dt, n))
        bad(what, "int32_data has " + std::to_string(p.int32_data().size()) + " packed values, expected " +
                      std::to_string(packed_bytes(dt, n)));
      return;
    default: return check_count(p.int32_data(), n, what, "int32_data");
  }
}

}  // namespace

Tensor tensor_from_proto(const onnx::TensorProto& p, const std::string& base_dir,
                         const std::string& what, std::string_view kept_raw) {
  if (!dtype_is_valid(p.data_type())) bad(what, "unknown data_type " + std::to_string(p.data_type()));
  DType dt = static_cast<DType>(p.data_type());
  if (dt == DType::kComplex64 || dt == DType::kComplex128)
    throw Error(ErrorKind::kUnsupported, "tensor '" + what + "': complex element types are not supported");
  std::vector<int64_t> dims(p.dims().begin(), p.dims().end());
  for (int64_t d : dims)
    if (d < 0) bad(what, "negative dimension in shape " + dims_to_string(dims));
  if (p.has_segment()) throw Error(ErrorKind::kUnsupported, "tensor '" + what + "': segmented tensors");
  int64_t n = 0;
  try {
    n = checked_numel(dims);
  } catch (const Error& e) {
    bad(what, e.message());
  }
  const size_t esize = dtype_size(dt);
  if (esize == 0)
    throw Error(ErrorKind::kUnsupported,
                "tensor '" + what + "': element type " + std::string(dtype_name(dt)) + " is not supported");
  if (esize && n > std::numeric_limits<int64_t>::max() / static_cast<int64_t>(esize))
    bad(what, "shape " + dims_to_string(dims) + " has too many bytes");
  const size_t nbytes = static_cast<size_t>(n) * esize;
  const size_t stored_bytes = static_cast<size_t>(packed_bytes(dt, n));  // in raw/external data
  const bool external = p.data_location() == onnx::TensorProto::EXTERNAL;
  // Every size check against the proto's data comes before the allocation.
  auto alloc = [&](bool zeroed = true) {
    try {
      return zeroed ? Tensor(dt, dims) : Tensor::uninitialized(dt, dims);
    } catch (const Error& e) {
      bad(what, e.message());
    }
  };
  auto alloc_weight = [&] {
    try {
      return Tensor::populated(dt, dims);
    } catch (const Error& e) {
      bad(what, e.message());
    }
  };
  Tensor t;

  if (dt == DType::kString) {
    if (external) bad(what, "string tensors cannot use external data");
    check_count(p.string_data(), n, what, "string_data");
    t = alloc();
    for (int64_t i = 0; i < n; ++i) t.data<std::string>()[i] = p.string_data(static_cast<int>(i));
    return t;
  }
  if (external || p.has_raw_data() || kept_raw.data()) {
    std::string ext;
    std::string_view raw = kept_raw.data() ? kept_raw : std::string_view(p.raw_data());
    if (external) {
      ext = read_external(p, base_dir, what, stored_bytes);
      raw = ext;
    }
    if (raw.size() != stored_bytes)
      bad(what, "raw_data has " + std::to_string(raw.size()) + " bytes, but shape " + dims_to_string(dims) +
                    " of " + std::string(dtype_name(dt)) + " needs " + std::to_string(stored_bytes));
    // Plain element types are copied whole: no need to zero the storage first (a large one's
    // pages are populated in bulk, Tensor::populated).
    t = dtype_packed_bits(dt) || dt == DType::kBool ? alloc() : alloc_weight();
    if (dtype_packed_bits(dt)) {
      unpack_sub_byte([&](int64_t k) { return raw[static_cast<size_t>(k)]; }, dt, n, t);
    } else if (dt == DType::kBool) {
      for (int64_t i = 0; i < n; ++i) t.data<bool>()[i] = raw[static_cast<size_t>(i)] != 0;
    } else if (nbytes) {
      std::memcpy(t.raw(), raw.data(), nbytes);
    }
    return t;
  }
  check_typed_count(p, dt, n, what);
  t = alloc();
  switch (dt) {
    case DType::kFloat32:
      check_count(p.float_data(), n, what, "float_data");
      std::copy(p.float_data().begin(), p.float_data().end(), t.data<float>());
      break;
    case DType::kFloat64:
      check_count(p.double_data(), n, what, "double_data");
      std::copy(p.double_data().begin(), p.double_data().end(), t.data<double>());
      break;
    case DType::kInt64:
      check_count(p.int64_data(), n, what, "int64_data");
      std::copy(p.int64_data().begin(), p.int64_data().end(), t.data<int64_t>());
      break;
    case DType::kUInt32:
    case DType::kUInt64:
      check_count(p.uint64_data(), n, what, "uint64_data");
      for (int64_t i = 0; i < n; ++i) {
        uint64_t v = p.uint64_data(static_cast<int>(i));
        if (dt == DType::kUInt32) t.data<uint32_t>()[i] = static_cast<uint32_t>(v);
        else t.data<uint64_t>()[i] = v;
      }
      break;
    case DType::kInt32: case DType::kInt16: case DType::kInt8: case DType::kUInt16:
    case DType::kUInt8: case DType::kBool: case DType::kFloat16: case DType::kBFloat16:
    case DType::kFloat8E4M3FN: case DType::kFloat8E4M3FNUZ: case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ: case DType::kFloat8E8M0: {
      check_count(p.int32_data(), n, what, "int32_data");
      for (int64_t i = 0; i < n; ++i) {
        int32_t v = p.int32_data(static_cast<int>(i));
        switch (dt) {
          case DType::kInt32: t.data<int32_t>()[i] = v; break;
          case DType::kInt16: t.data<int16_t>()[i] = static_cast<int16_t>(v); break;
          case DType::kUInt16: t.data<uint16_t>()[i] = static_cast<uint16_t>(v); break;
          case DType::kFloat16: case DType::kBFloat16:
            t.data<uint16_t>()[i] = static_cast<uint16_t>(v);
            break;
          case DType::kBool: t.data<bool>()[i] = v != 0; break;
          default: t.data<uint8_t>()[i] = static_cast<uint8_t>(v); break;
        }
      }
      break;
    }
    case DType::kUInt4: case DType::kInt4: case DType::kFloat4E2M1:
    case DType::kUInt2: case DType::kInt2:
      // Packed in int32_data (one byte per entry, count checked above); unpacked in memory.
      unpack_sub_byte([&](int64_t k) { return p.int32_data(static_cast<int>(k)); }, dt, n, t);
      break;
    default:
      bad(what, "unsupported data_type " + std::to_string(p.data_type()));
  }
  return t;
}

void tensor_to_proto(const Tensor& t, const std::string& name, onnx::TensorProto* p) {
  p->Clear();
  p->set_name(name);
  p->set_data_type(static_cast<int32_t>(t.dtype()));
  for (int64_t d : t.dims()) p->add_dims(d);
  if (t.dtype() == DType::kString) {
    for (int64_t i = 0; i < t.numel(); ++i) p->add_string_data(t.data<std::string>()[i]);
    return;
  }
  if (t.dtype() == DType::kBool) {
    std::string raw(static_cast<size_t>(t.numel()), '\0');
    for (int64_t i = 0; i < t.numel(); ++i) raw[static_cast<size_t>(i)] = t.data<bool>()[i] ? 1 : 0;
    p->set_raw_data(raw);
    return;
  }
  if (dtype_packed_bits(t.dtype())) {
    p->set_raw_data(pack_sub_byte(t));
    return;
  }
  p->set_raw_data(std::string(static_cast<const char*>(t.raw()), t.nbytes()));
}

}  // namespace kiln
