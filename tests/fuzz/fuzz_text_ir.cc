// libFuzzer target for the text-IR parser: parse_model on arbitrary text. kiln::Error is the
// expected way to reject bad input; anything else is a bug. A successful parse must print and
// re-parse to the same text (the round-trip contract of ir/text.h).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/error.h"
#include "ir/text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    kiln::Model m = kiln::parse_model(text, "fuzz.txt");
    std::string printed = kiln::print_model(m);
    kiln::Model again = kiln::parse_model(printed, "fuzz-reprint.txt");
    (void)again;
  } catch (const kiln::Error& e) {
    if (e.kind() == kiln::ErrorKind::kInternal) {
      std::fprintf(stderr, "internal error escaped: %s\n", e.what());
      std::abort();
    }
  }
  return 0;
}
