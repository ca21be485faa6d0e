// ImageDecoder (opset 20): BMP, JPEG, JPEG 2000, PNG, PNM, TIFF and WebP bytes to an [H, W, C]
// uint8 image (RGB, BGR or Grayscale), decoded by Debian's FreeImage (its libjpeg-turbo,
// libpng, libtiff, libwebp and OpenJPEG), no codec of kiln's own. As the ONNX reference
// (Pillow): JPEG with the accurate integer IDCT and libjpeg-turbo's smooth chroma upsampling,
// Grayscale as ITU-R 601 luma of the RGB pixels with Pillow's fixed-point weights
// (L = (19595 R + 38470 G + 7471 B + 2^15) >> 16). Bytes that are not a decodable image are a
// bad-input error naming the node (the ONNX text allows an empty image instead; the reference
// implementation raises, and so does kiln). Raw formats (PNM, BMP) cut short decode with the
// missing pixels zero, as FreeImage reads them; the compressed ones report it. Registered from register_extra_ops (ops/generator.cc).
#include <FreeImage.h>
#include <tiffio.h>

#include <memory>
#include <mutex>
#include <string>

#include "ops/op_util.h"
#include "ops/tensor_util.h"

namespace kiln {
namespace {

// FreeImage reports decoder errors and warnings (a truncated JPEG's "premature end of data")
// through one process-wide callback; the decode on this thread collects them and fails with
// them, where Pillow would raise. The libtiff under FreeImage prints an "Internal error" for
// every EXIF tag FreeImage looks up: its handlers are turned off.
thread_local std::string* decode_messages = nullptr;

void collect_freeimage_message(FREE_IMAGE_FORMAT, const char* message) {
  if (!decode_messages || !message) return;
  if (!decode_messages->empty()) *decode_messages += "; ";
  *decode_messages += message;
}

void init_freeimage() {
  static std::once_flag once;
  std::call_once(once, [] {
    FreeImage_SetOutputMessage(collect_freeimage_message);
    TIFFSetErrorHandler(nullptr);
    TIFFSetWarningHandler(nullptr);
  });
}

struct BitmapDeleter {
  void operator()(FIBITMAP* b) const { FreeImage_Unload(b); }
};
struct MemoryDeleter {
  void operator()(FIMEMORY* m) const { FreeImage_CloseMemory(m); }
};
using Bitmap = std::unique_ptr<FIBITMAP, BitmapDeleter>;

// The decoded image as 24-bit RGB (FreeImage's rows are bottom-up, BGR in memory on x86).
Bitmap decode_rgb(const KernelContext& ctx, const Tensor& bytes) {
  init_freeimage();
  if (bytes.dtype() != DType::kUInt8 || bytes.rank() != 1)
    ctx.fail(ErrorKind::kBadInput, "encoded_stream should be a 1-D uint8 tensor, got " + type_string(bytes));
  if (bytes.numel() == 0) ctx.fail(ErrorKind::kBadInput, "encoded_stream is empty");
  std::unique_ptr<FIMEMORY, MemoryDeleter> mem(
      FreeImage_OpenMemory(bytes.data<uint8_t>(), static_cast<DWORD>(bytes.numel())));
  const FREE_IMAGE_FORMAT format = FreeImage_GetFileTypeFromMemory(mem.get(), 0);
  if (format == FIF_UNKNOWN)
    ctx.fail(ErrorKind::kBadInput, "encoded_stream (" + std::to_string(bytes.numel()) +
                                       " bytes) is not an image of a supported format (BMP, JPEG, JPEG 2000, PNG, "
                                       "PNM, TIFF, WebP)");
  std::string messages;
  decode_messages = &messages;
  Bitmap loaded(FreeImage_LoadFromMemory(format, mem.get(), format == FIF_JPEG ? JPEG_ACCURATE : 0));
  decode_messages = nullptr;
  const char* name = FreeImage_GetFormatFromFIF(format);
  if (!loaded || FreeImage_GetWidth(loaded.get()) == 0 || FreeImage_GetHeight(loaded.get()) == 0 || !messages.empty())
    ctx.fail(ErrorKind::kBadInput, std::string("encoded_stream looks like ") + (name ? name : "an image") +
                                       " but does not decode (truncated or corrupted)" +
                                       (messages.empty() ? "" : ": " + messages));
  Bitmap rgb(FreeImage_ConvertTo24Bits(loaded.get()));
  if (!rgb) ctx.fail(ErrorKind::kBadInput, std::string("cannot convert the decoded ") + (name ? name : "") + " image to RGB");
  return rgb;
}

void image_decoder_kernel(KernelContext& ctx) {
  const std::string format = ctx.attr_string("pixel_format", "RGB");
  if (format != "RGB" && format != "BGR" && format != "Grayscale")
    ctx.fail(ErrorKind::kInvalidModel, "pixel_format should be RGB, BGR or Grayscale, got '" + format + "'");
  const Bitmap rgb = decode_rgb(ctx, ctx.input(0));
  const int64_t w = FreeImage_GetWidth(rgb.get()), h = FreeImage_GetHeight(rgb.get());
  const int64_t c = format == "Grayscale" ? 1 : 3;
  Tensor y = Tensor::uninitialized(DType::kUInt8, {h, w, c});
  uint8_t* out = y.data<uint8_t>();
  for (int64_t row = 0; row < h; ++row) {
    const BYTE* src = FreeImage_GetScanLine(rgb.get(), static_cast<int>(h - 1 - row));
    for (int64_t x = 0; x < w; ++x, src += 3) {
      const uint32_t r = src[FI_RGBA_RED], g = src[FI_RGBA_GREEN], b = src[FI_RGBA_BLUE];
      if (c == 1) {
        *out++ = static_cast<uint8_t>((19595 * r + 38470 * g + 7471 * b + 0x8000) >> 16);
      } else if (format == "RGB") {
        *out++ = static_cast<uint8_t>(r), *out++ = static_cast<uint8_t>(g), *out++ = static_cast<uint8_t>(b);
      } else {
        *out++ = static_cast<uint8_t>(b), *out++ = static_cast<uint8_t>(g), *out++ = static_cast<uint8_t>(r);
      }
    }
  }
  ctx.set_output(0, std::move(y));
}

// [?, ?, C]: the size is in the bytes.
void infer_image_decoder(InferContext& ctx) {
  const int64_t c = ctx.attr_string("pixel_format", "RGB") == "Grayscale" ? 1 : 3;
  ctx.set_output_type(0, Type::tensor(DType::kUInt8, Shape(std::vector<Dim>{Dim(), Dim(), Dim(c)})));
}

}  // namespace

void register_image_ops(OpRegistry& r) {
  r.add("ImageDecoder").since(20).inputs(1).outputs(1).run(image_decoder_kernel).shape(infer_image_decoder)
      .dynamic_shape();
}

}  // namespace kiln
