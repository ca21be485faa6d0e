// strip_initializer_payloads (initializer_payloads.h): a protobuf wire-format walk over
// ModelProto.graph (field 7) -> GraphProto.initializer (field 5) -> TensorProto.raw_data
// (field 9), copying every other field as it is and re-encoding the enclosing lengths.
#include "frontend/onnx/initializer_payloads.h"

#include <cstdint>

namespace kiln {
namespace {

constexpr uint32_t kModelGraph = 7, kGraphInitializer = 5, kTensorRawData = 9;
constexpr uint32_t kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

struct Reader {
  const char* p;
  const char* end;
  bool ok = true;

  bool more() const { return ok && p < end; }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p >= end) break;
      const uint8_t b = static_cast<uint8_t>(*p++);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    ok = false;
    return 0;
  }
  // The next field: its number, wire type, and the bytes of its value (for length-delimited
  // ones, the payload without the length); [start, p) spans the whole field.
  bool field(uint32_t* number, uint32_t* type, std::string_view* value, const char** start) {
    *start = p;
    const uint64_t tag = varint();
    if (!ok) return false;
    *number = static_cast<uint32_t>(tag >> 3);
    *type = static_cast<uint32_t>(tag & 7);
    const char* v = p;
    size_t n = 0;
    switch (*type) {
      case kVarint: varint(); break;
      case kFixed64: n = 8; break;
      case kFixed32: n = 4; break;
      case kLengthDelimited: {
        const uint64_t len = varint();
        if (!ok || len > static_cast<uint64_t>(end - p)) return ok = false;
        v = p;
        n = static_cast<size_t>(len);
        break;
      }
      default: return ok = false;  // groups: not in ONNX
    }
    if (!ok || n > static_cast<size_t>(end - p)) return ok = false;
    p += n;
    *value = *type == kVarint ? std::string_view(v, static_cast<size_t>(p - v)) : std::string_view(v, n);
    return true;
  }
};

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_message(std::string& out, uint32_t number, const std::string& body) {
  put_varint(out, (static_cast<uint64_t>(number) << 3) | kLengthDelimited);
  put_varint(out, body.size());
  out += body;
}

// A TensorProto without its raw_data when that is at least min_bytes (the last one wins, as in
// protobuf); *payload gets it.
bool strip_tensor(std::string_view in, size_t min_bytes, std::string* out, std::string_view* payload) {
  Reader r{in.data(), in.data() + in.size()};
  std::string_view raw;
  bool found = false;
  while (r.more()) {
    uint32_t number = 0, type = 0;
    std::string_view value;
    const char* start = nullptr;
    if (!r.field(&number, &type, &value, &start)) return false;
    if (number == kTensorRawData && type == kLengthDelimited) {
      raw = value;
      found = true;
    }
  }
  if (!r.ok || !found || raw.size() < min_bytes) return false;
  Reader w{in.data(), in.data() + in.size()};
  while (w.more()) {
    uint32_t number = 0, type = 0;
    std::string_view value;
    const char* start = nullptr;
    w.field(&number, &type, &value, &start);
    if (number == kTensorRawData && type == kLengthDelimited) continue;
    out->append(start, static_cast<size_t>(w.p - start));
  }
  *payload = raw;
  return true;
}

bool strip_graph(std::string_view in, size_t min_bytes, std::string* out, std::vector<std::string_view>* payloads) {
  Reader r{in.data(), in.data() + in.size()};
  while (r.more()) {
    uint32_t number = 0, type = 0;
    std::string_view value;
    const char* start = nullptr;
    if (!r.field(&number, &type, &value, &start)) return false;
    std::string tensor;
    std::string_view payload;
    if (number == kGraphInitializer && type == kLengthDelimited && strip_tensor(value, min_bytes, &tensor, &payload)) {
      put_message(*out, number, tensor);
      payloads->push_back(payload);
      continue;
    }
    if (number == kGraphInitializer) {
      if (type != kLengthDelimited) return false;
      payloads->emplace_back();
    }
    out->append(start, static_cast<size_t>(r.p - start));
  }
  return r.ok;
}

}  // namespace

std::optional<StrippedModel> strip_initializer_payloads(const char* data, size_t size, size_t min_bytes) {
  Reader r{data, data + size};
  StrippedModel m;
  int graphs = 0;
  while (r.more()) {
    uint32_t number = 0, type = 0;
    std::string_view value;
    const char* start = nullptr;
    if (!r.field(&number, &type, &value, &start)) return std::nullopt;
    if (number == kModelGraph && type == kLengthDelimited) {
      if (++graphs > 1) return std::nullopt;  // protobuf would merge them: leave that to it
      std::string graph;
      if (!strip_graph(value, min_bytes, &graph, &m.payloads)) return std::nullopt;
      put_message(m.bytes, number, graph);
      continue;
    }
    m.bytes.append(start, static_cast<size_t>(r.p - start));
  }
  if (!r.ok) return std::nullopt;
  for (std::string_view p : m.payloads)
    if (p.data()) return m;
  return std::nullopt;
}

}  // namespace kiln
