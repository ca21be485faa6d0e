// ImageDecoder (ops/image_decoder.cc) on hand-made images: PPM (P6) and PGM (P5) bytes decode to
// the pixels written, in RGB, BGR and Grayscale (Pillow's luma weights); empty, unrecognized and
// truncated bytes and an unknown pixel_format are clean errors naming the node, on both engines.
// (The ONNX node tests of every format run in the conformance suites.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "driver/compiled_executor.h"
#include "ir/text.h"
#include "pass/pass.h"
#include "runtime/interpreter.h"

namespace kiln {
namespace {

std::string model(const std::string& format) {
  return R"(model ir=9 opsets={"": 20}
graph @main(%b: u8[?]) -> (%y: u8[?,?,?]) {
  %y = ImageDecoder(%b) {pixel_format=")" + format + R"("} : u8[?,?,?]
  return %y
}
)";
}

RtValue bytes(const std::string& s) {
  Tensor t(DType::kUInt8, {static_cast<int64_t>(s.size())});
  for (size_t i = 0; i < s.size(); ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(s[i]);
  return RtValue(t);
}

// A 3x2 (width x height) P6 image: pixel (x, y) = (10 x + y, 100 + y, 200 - 10 x).
std::string ppm() {
  std::string s = "P6\n3 2\n255\n";
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 3; ++x) s += {static_cast<char>(10 * x + y), static_cast<char>(100 + y), static_cast<char>(200 - 10 * x)};
  return s;
}

std::string unhex(const std::string& h) {
  std::string s;
  for (size_t i = 0; i + 1 < h.size(); i += 2) s += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
  return s;
}

// An 8x8 RGB image, pixel (x, y) from the top = (200, 25 (7 - y), 30 x), as FreeImage writes it,
// JPEG and PNG.
const std::string kJpeg = unhex(
    "ffd8ffe000104a46494600010101004800480000ffdb004300080606070605080707070909080a0c140d0c0b0b0c1912130f"
    "141d1a1f1e1d1a1c1c20242e2720222c231c1c2837292c30313434341f27393d38323c2e333432ffdb0043010909090c0b0c"
    "180d0d1832211c21323232323232323232323232323232323232323232323232323232323232323232323232323232323232"
    "3232323232323232ffc00011080008000803012200021101031101ffc4001f00000105010101010101000000000000000001"
    "02030405060708090a0bffc400b5100002010303020403050504040000017d01020300041105122131410613516107227114"
    "328191a1082342b1c11552d1f02433627282090a161718191a25262728292a3435363738393a434445464748494a53545556"
    "5758595a636465666768696a737475767778797a838485868788898a92939495969798999aa2a3a4a5a6a7a8a9aab2b3b4b5"
    "b6b7b8b9bac2c3c4c5c6c7c8c9cad2d3d4d5d6d7d8d9dae1e2e3e4e5e6e7e8e9eaf1f2f3f4f5f6f7f8f9faffc4001f010003"
    "0101010101010101010000000000000102030405060708090a0bffc400b51100020102040403040705040400010277000102"
    "031104052131061241510761711322328108144291a1b1c109233352f0156272d10a162434e125f11718191a262728292a35"
    "363738393a434445464748494a535455565758595a636465666768696a737475767778797a82838485868788898a92939495"
    "969798999aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2c3c4c5c6c7c8c9cad2d3d4d5d6d7d8d9dae2e3e4e5e6e7e8e9ea"
    "f2f3f4f5f6f7f8f9faffda000c03010002110311003f008ad7c5bd3f79fad14515ece4982a3f548e87ddd5cbb0fcdb1fffd9");
const std::string kPng = unhex(
    "89504e470d0a1a0a0000000d49484452000000080000000808020000004b6d29dc000000097048597300000b1300000b1301"
    "009a9c1800000019494441540899633cb19e8181410e13b1303c67c00a06a70400325208b83b2c65e40000000049454e44ae"
    "426082");

// Decodes with the interpreter and the compiled engine; both must agree.
Tensor decode(const std::string& format, const std::string& data) {
  Model m = parse_model(model(format));
  Interpreter interp(m);
  Tensor a = interp.run({bytes(data)})[0].tensor;
  PassContext ctx;
  run_passes(m, default_pipeline(), ctx);
  CompiledExecutor ex(m);
  Tensor b = ex.run({bytes(data)})[0].tensor;
  EXPECT_TRUE(a.same_as(b));
  return a;
}

TEST(ImageDecoder, PpmInEveryPixelFormat) {
  const Tensor rgb = decode("RGB", ppm());
  ASSERT_EQ(rgb.dims(), (std::vector<int64_t>{2, 3, 3}));
  const Tensor bgr = decode("BGR", ppm());
  const Tensor gray = decode("Grayscale", ppm());
  ASSERT_EQ(gray.dims(), (std::vector<int64_t>{2, 3, 1}));
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 3; ++x) {
      const uint32_t r = 10 * x + y, g = 100 + y, b = 200 - 10 * x;
      const uint8_t* p = rgb.data<uint8_t>() + (y * 3 + x) * 3;
      const uint8_t* q = bgr.data<uint8_t>() + (y * 3 + x) * 3;
      EXPECT_EQ(p[0], r);
      EXPECT_EQ(p[1], g);
      EXPECT_EQ(p[2], b);
      EXPECT_EQ(q[0], b);
      EXPECT_EQ(q[2], r);
      EXPECT_EQ(gray.data<uint8_t>()[y * 3 + x], (19595 * r + 38470 * g + 7471 * b + 0x8000) >> 16);
    }
}

// JPEG is lossy (4:2:0 chroma on a steep blue ramp): near the pixels written, within 40.
TEST(ImageDecoder, PngExactJpegClose) {
  const Tensor png = decode("RGB", kPng);
  ASSERT_EQ(png.dims(), (std::vector<int64_t>{8, 8, 3}));
  const Tensor jpg = decode("RGB", kJpeg);
  ASSERT_EQ(jpg.dims(), (std::vector<int64_t>{8, 8, 3}));
  for (int y = 0; y < 8; ++y)
    for (int x = 0; x < 8; ++x) {
      const int want[3] = {200, 25 * (7 - y), 30 * x};
      for (int c = 0; c < 3; ++c) {
        EXPECT_EQ(png.data<uint8_t>()[(y * 8 + x) * 3 + c], want[c]);
        EXPECT_NEAR(jpg.data<uint8_t>()[(y * 8 + x) * 3 + c], want[c], 40) << x << "," << y << "," << c;
      }
    }
}

TEST(ImageDecoder, GrayscaleImageToRgb) {
  std::string pgm = "P5\n2 1\n255\n";
  pgm += {static_cast<char>(7), static_cast<char>(250)};
  const Tensor rgb = decode("RGB", pgm);
  ASSERT_EQ(rgb.dims(), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(rgb.data<uint8_t>()[0], 7);
  EXPECT_EQ(rgb.data<uint8_t>()[5], 250);
}

// The error of decoding `data`, on the interpreter and on the compiled engine.
void expect_error(const std::string& format, const std::string& data, ErrorKind kind, const std::string& words) {
  Model m = parse_model(model(format));
  for (bool compiled : {false, true}) {
    try {
      if (compiled) {
        PassContext ctx;
        run_passes(m, default_pipeline(), ctx);
        CompiledExecutor ex(m);
        ex.run({bytes(data)});
      } else {
        Interpreter(m).run({bytes(data)});
      }
      ADD_FAILURE() << "no error for " << words;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), kind) << e.what();
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("ImageDecoder"), std::string::npos) << e.what();
    }
  }
}

TEST(ImageDecoder, MalformedBytesAreCleanErrors) {
  expect_error("RGB", "", ErrorKind::kBadInput, "is empty");
  expect_error("RGB", "this is not an image at all, just words", ErrorKind::kBadInput, "not an image");
  expect_error("RGB", kJpeg.substr(0, kJpeg.size() / 2), ErrorKind::kBadInput, "does not decode");
  expect_error("RGB", kPng.substr(0, kPng.size() - 20), ErrorKind::kBadInput, "does not decode");
  // A PNG signature and nothing else.
  expect_error("RGB", std::string("\x89PNG\r\n\x1a\n", 8), ErrorKind::kBadInput, "does not decode");
  expect_error("CMYK", ppm(), ErrorKind::kInvalidModel, "pixel_format");
}

}  // namespace
}  // namespace kiln
