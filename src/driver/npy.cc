// .npy parsing: header dict with descr, fortran_order and shape.
#include "driver/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace kiln {
namespace {

struct NpyType {
  const char* descr;
  DType dtype;
};
constexpr NpyType kTypes[] = {
    {"<f4", DType::kFloat32}, {"<f8", DType::kFloat64}, {"<f2", DType::kFloat16},
    {"|i1", DType::kInt8},    {"<i2", DType::kInt16},   {"<i4", DType::kInt32},
    {"<i8", DType::kInt64},   {"|u1", DType::kUInt8},   {"<u2", DType::kUInt16},
    {"<u4", DType::kUInt32},  {"<u8", DType::kUInt64},  {"|b1", DType::kBool},
};

[[noreturn]] void bad(const std::string& name, const std::string& msg) {
  ErrorLocation loc;
  loc.file = name;
  throw Error(ErrorKind::kBadInput, "not a valid .npy file: " + msg, loc);
}

std::string header_value(const std::string& header, const std::string& key) {
  auto k = header.find("'" + key + "'");
  if (k == std::string::npos) return "";
  auto colon = header.find(':', k);
  if (colon == std::string::npos) return "";
  size_t i = colon + 1;
  while (i < header.size() && header[i] == ' ') ++i;
  if (i >= header.size()) return "";
  char open = header[i];
  if (open == '\'' || open == '"') {
    auto end = header.find(open, i + 1);
    return end == std::string::npos ? "" : header.substr(i + 1, end - i - 1);
  }
  if (open == '(') {
    auto end = header.find(')', i);
    return end == std::string::npos ? "" : header.substr(i, end - i + 1);
  }
  auto end = header.find_first_of(",}", i);
  return header.substr(i, end == std::string::npos ? std::string::npos : end - i);
}

}  // namespace

bool npy_representable(DType t) {
  for (const auto& k : kTypes)
    if (k.dtype == t) return true;
  return false;
}

Tensor parse_npy(const std::string& bytes, const std::string& name) {
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) bad(name, "missing magic header");
  int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len, offset;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) bad(name, "truncated header");
    header_len = 0;
    for (int i = 0; i < 4; ++i) header_len |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    offset = 12;
  } else {
    bad(name, "unknown format version " + std::to_string(major));
  }
  if (offset + header_len > bytes.size()) bad(name, "truncated header");
  std::string header = bytes.substr(offset, header_len);
  std::string descr = header_value(header, "descr");
  if (header_value(header, "fortran_order").find("True") != std::string::npos)
    bad(name, "Fortran-order arrays are not supported; save with np.ascontiguousarray");
  DType dt = DType::kUndefined;
  for (const auto& k : kTypes)
    if (descr == k.descr || (descr.size() == 3 && descr[0] == '=' && descr.substr(1) == std::string(k.descr).substr(1)))
      dt = k.dtype;
  if (dt == DType::kUndefined) bad(name, "unsupported dtype '" + descr + "'");
  std::string shape = header_value(header, "shape");
  if (shape.empty() || shape.front() != '(') bad(name, "missing shape");
  std::vector<int64_t> dims;
  std::string cur;
  for (char c : shape.substr(1)) {
    if (c >= '0' && c <= '9') {
      cur += c;
      if (cur.size() > 18) bad(name, "dimension too large");
    } else if (c == ',' || c == ')') {
      if (!cur.empty()) dims.push_back(std::stoll(cur));
      cur.clear();
    } else if (c != ' ' && c != 'L') {
      bad(name, "malformed shape '" + shape + "'");
    }
  }
  Tensor t(dt, dims);
  size_t data_off = offset + header_len;
  if (bytes.size() - data_off != t.nbytes())
    bad(name, "data has " + std::to_string(bytes.size() - data_off) + " bytes, shape " + dims_to_string(dims) +
                  " needs " + std::to_string(t.nbytes()));
  if (t.nbytes()) std::memcpy(t.raw(), bytes.data() + data_off, t.nbytes());
  if (dt == DType::kBool)
    for (int64_t i = 0; i < t.numel(); ++i) t.data<uint8_t>()[i] = t.data<uint8_t>()[i] ? 1 : 0;
  return t;
}

Tensor read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ErrorLocation loc;
    loc.file = path;
    throw Error(ErrorKind::kBadInput, "cannot open input file", loc);
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_npy(ss.str(), path);
}

void write_npy(const std::string& path, const Tensor& t) {
  const char* descr = nullptr;
  for (const auto& k : kTypes)
    if (k.dtype == t.dtype()) descr = k.descr;
  KILN_CHECK(descr != nullptr);
  std::string shape = "(";
  for (int64_t d : t.dims()) shape += std::to_string(d) + ", ";
  if (t.rank() > 1) shape.resize(shape.size() - 2);
  else if (t.rank() == 1) shape.resize(shape.size() - 1);
  shape += ")";
  std::string header = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  out += header;
  out.append(static_cast<const char*>(t.raw()), t.nbytes());
  std::ofstream f(path, std::ios::binary);
  f.write(out.data(), static_cast<std::streamsize>(out.size()));
  if (!f) throw Error(ErrorKind::kUsage, "cannot write '" + path + "'");
}

}  // namespace kiln
