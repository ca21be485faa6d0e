// Image calibration samples (--calibration-preprocess): decode, resize to the model's input
// size and normalise as the common image models expect, by running a small graph of ONNX ops
// (ImageDecoder, Resize, ...) on the interpreter, so the pixels are those ONNX's reference gives.
#include <cmath>
#include <fstream>
#include <iterator>
#include <sstream>

#include "core/error.h"
#include "driver/quantize/calibration.h"
#include "ir/text.h"
#include "runtime/interpreter.h"

namespace kiln {
namespace {

struct Preset {
  const char* name;
  const char* pixel_format;  // ImageDecoder's
  float scale[3], shift[3];  // y = x * scale + shift per channel, x in 0..255
  const char* what;
};

const std::vector<Preset>& presets() {
  static const std::vector<Preset> p = {
      {"imagenet", "RGB",
       {1 / (255 * 0.229f), 1 / (255 * 0.224f), 1 / (255 * 0.225f)},
       {-0.485f / 0.229f, -0.456f / 0.224f, -0.406f / 0.225f},
       "RGB, (x/255 - mean) / std with ImageNet's mean and std (torchvision)"},
      {"unit", "RGB", {1 / 255.f, 1 / 255.f, 1 / 255.f}, {0, 0, 0}, "RGB, x/255 in [0, 1] (YOLO)"},
      {"symmetric", "RGB", {2 / 255.f, 2 / 255.f, 2 / 255.f}, {-1, -1, -1}, "RGB, x/127.5 - 1 in [-1, 1] (PaddleOCR)"},
      {"caffe", "BGR", {1, 1, 1}, {-104, -117, -123}, "BGR, x - (104, 117, 123) (Caffe models)"},
      {"raw", "RGB", {1, 1, 1}, {0, 0, 0}, "RGB, x in 0..255"},
  };
  return p;
}

const Preset& find_preset(const std::string& name) {
  std::string known;
  for (const auto& p : presets()) {
    if (name == p.name) return p;
    known += std::string(known.empty() ? "" : ", ") + p.name;
  }
  throw Error(ErrorKind::kUsage, "--calibration-preprocess " + name + ": expected one of " + known);
}

std::string floats(const float (&v)[3]) {
  std::ostringstream o;
  o.precision(9);
  o << "[" << v[0] << ", " << v[1] << ", " << v[2] << "]";
  return o.str();
}

// The preprocessing graph for a [1, 3, H, W] (NCHW) or [1, H, W, 3] (NHWC) input.
std::string preprocess_graph(const Preset& p, bool nchw, int64_t h, int64_t w) {
  const std::string out = nchw ? "1,3," + std::to_string(h) + "," + std::to_string(w)
                               : "1," + std::to_string(h) + "," + std::to_string(w) + ",3";
  const std::string param = nchw ? "f32[1,3,1,1]" : "f32[1,1,1,3]";
  std::ostringstream g;
  g << "model ir=10 opsets={\"\": 20}\n"
    << "graph @main(%bytes: u8[?]) -> (%y: f32[" << out << "]) {\n"
    << "  %axes = const i64[1] [0]\n"
    << "  %sizes = const i64[4] [" << out << "]\n"
    << "  %scale = const " << param << " " << floats(p.scale) << "\n"
    << "  %shift = const " << param << " " << floats(p.shift) << "\n"
    << "  %img = ImageDecoder(%bytes) {pixel_format=\"" << p.pixel_format << "\"} : u8[?,?,3]\n"
    << "  %f = Cast(%img) {to=1} : f32[?,?,3]\n";
  if (nchw)
    g << "  %t = Transpose(%f) {perm=[2,0,1]} : f32[3,?,?]\n  %n = Unsqueeze(%t, %axes) : f32[1,3,?,?]\n";
  else
    g << "  %n = Unsqueeze(%f, %axes) : f32[1,?,?,3]\n";
  g << "  %r = Resize(%n, _, _, %sizes) {mode=\"linear\", antialias=1} : f32[" << out << "]\n"
    << "  %m = Mul(%r, %scale) : f32[" << out << "]\n"
    << "  %y = Add(%m, %shift) : f32[" << out << "]\n"
    << "  return %y\n}\n";
  return g.str();
}

}  // namespace

bool is_image_file(const std::string& path) {
  static const char* kExt[] = {".png", ".jpg", ".jpeg", ".bmp", ".ppm", ".pgm", ".tif", ".tiff", ".webp"};
  std::string lower;
  for (char c : path) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* e : kExt) {
    const std::string ext(e);
    if (lower.size() > ext.size() && lower.compare(lower.size() - ext.size(), ext.size(), ext) == 0) return true;
  }
  return false;
}

std::string image_preprocess_help() {
  std::string s;
  for (const auto& p : presets()) s += std::string(s.empty() ? "" : "; ") + p.name + ": " + p.what;
  return s;
}

ImageSampleReader::ImageSampleReader(const std::string& preset, const Value& input,
                                     const std::map<std::string, int64_t>& dims) {
  const Preset& p = find_preset(preset);
  const auto& shape = input.type.shape;
  const std::string what = "--calibration-preprocess: input '" + input.name + "'";
  if (input.type.kind != Type::Kind::kTensor || input.type.dtype != DType::kFloat32 || !shape || shape->rank() != 4)
    throw Error(ErrorKind::kUsage, what + " is not a 4-D float tensor (images feed [1,3,H,W] or [1,H,W,3] inputs)");
  auto dim = [&](int i) -> int64_t {
    const Dim& d = shape->dims[i];
    if (d.known()) return d.value;
    auto it = dims.find(d.symbol);
    if (d.symbol.empty() || it == dims.end())
      throw Error(ErrorKind::kUsage, what + " has a symbolic dim" + (d.symbol.empty() ? "" : " '" + d.symbol + "'") +
                                         ": give its size with --dim " + (d.symbol.empty() ? "NAME" : d.symbol) +
                                         "=N");
    return it->second;
  };
  const bool nchw = dim(1) == 3;
  if (!nchw && dim(3) != 3)
    throw Error(ErrorKind::kUsage, what + " has no 3-channel axis (images feed [1,3,H,W] or [1,H,W,3] inputs)");
  const int64_t h = nchw ? dim(2) : dim(1), w = nchw ? dim(3) : dim(2);
  graph_ = std::make_shared<Model>(parse_model(preprocess_graph(p, nchw, h, w), "<image preprocessing>"));
}

RtValue ImageSampleReader::read(const std::string& path) const {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(ErrorKind::kBadInput, path + ": cannot read");
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  Tensor t(DType::kUInt8, {static_cast<int64_t>(bytes.size())});
  std::copy(bytes.begin(), bytes.end(), t.data<uint8_t>());
  Interpreter interp(*graph_);
  try {
    return interp.run({RtValue(std::move(t))})[0];
  } catch (const Error& e) {
    throw Error(ErrorKind::kBadInput, path + ": " + e.what());
  }
}

}  // namespace kiln
