/* Runs a compiled kiln model (`kiln compile MODEL -o model.so`) through the C API:
 *   run_model MODEL.so INPUT.npy [OUTPUT.npy]
 * reads one float32 .npy input, prints the load time, the first output's shape, first values
 * and argmax, and writes that output as .npy when asked. Build: target kiln_example_c. */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kiln/c_api.h"

/* Reads a little-endian float32 C-order .npy (format 1.x/2.x) into *data; returns its bytes. */
static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static size_t read_npy(const char* path, void** data) {
  FILE* f = fopen(path, "rb");
  unsigned char pre[12];
  if (!f || fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) return 0;
  size_t hlen = pre[8] | (size_t)pre[9] << 8;
  if (pre[6] >= 2 && fread(pre + 10, 1, 2, f) == 2) hlen |= (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
  char* header = calloc(hlen + 1, 1);
  long start = ftell(f) + (long)hlen;
  if (fread(header, 1, hlen, f) != hlen || !strstr(header, "'<f4'")) return 0;
  fseek(f, 0, SEEK_END);
  size_t bytes = (size_t)(ftell(f) - start);
  fseek(f, start, SEEK_SET);
  *data = malloc(bytes);
  if (fread(*data, 1, bytes, f) != bytes) bytes = 0;
  fclose(f);
  free(header);
  return bytes;
}

/* Writes a float32 tensor as .npy, byte for byte as `kiln run -o` does. */
static void write_npy(const char* path, const kiln_tensor* t) {
  char shape[256] = "(", header[512];
  for (int i = 0; i < t->rank; ++i)
    sprintf(shape + strlen(shape), i + 1 < t->rank || t->rank == 1 ? "%lld, " : "%lld", (long long)t->dims[i]);
  if (t->rank == 1) shape[strlen(shape) - 1] = '\0';
  int n = sprintf(header, "{'descr': '<f4', 'fortran_order': False, 'shape': %s), }", shape);
  while ((10 + n + 1) % 64) header[n++] = ' ';
  header[n++] = '\n';
  FILE* f = fopen(path, "wb");
  fwrite("\x93NUMPY\x01\x00", 1, 8, f);
  fputc(n & 0xff, f), fputc(n >> 8, f);
  fwrite(header, 1, (size_t)n, f);
  fwrite(t->data, 1, t->size_bytes, f);
  fclose(f);
}

int main(int argc, char** argv) {
  if (argc < 3) return fprintf(stderr, "usage: %s MODEL.so INPUT.npy [OUTPUT.npy]\n", argv[0]), 2;
  kiln_model* model;
  kiln_tensor_info ii, oi;
  double t0 = now_ms();
  if (kiln_model_load_file(argv[1], NULL, &model) != KILN_OK) return fprintf(stderr, "%s\n", kiln_last_error()), 1;
  printf("loaded %s in %.1f ms\n", argv[1], now_ms() - t0);
  kiln_model_input_info(model, 0, &ii);
  kiln_model_output_info(model, 0, &oi);
  kiln_tensor in = {KILN_DTYPE_FLOAT32, ii.rank, {0}, NULL, 0}, out = {KILN_DTYPE_FLOAT32, 0, {0}, NULL, 4};
  for (int i = 0; i < ii.rank; ++i) in.dims[i] = ii.dims[i] < 0 ? 1 : ii.dims[i]; /* -1: symbolic (ONNX) */
  if (!(in.size_bytes = read_npy(argv[2], &in.data))) return fprintf(stderr, "cannot read %s\n", argv[2]), 1;
  for (int i = 0; i < oi.rank; ++i) out.size_bytes *= (size_t)(oi.dims[i] < 0 ? 1 : oi.dims[i]);
  out.data = malloc(out.size_bytes);
  t0 = now_ms();
  if (kiln_run(model, &in, 1, &out, 1) != KILN_OK) return fprintf(stderr, "%s\n", kiln_last_error()), 1;
  printf("first run %.1f ms\n", now_ms() - t0);
  const float* y = out.data;
  size_t n = out.size_bytes / 4, best = 0;
  printf("%s: [", oi.name);
  for (int i = 0; i < out.rank; ++i) printf(i ? ", %lld" : "%lld", (long long)out.dims[i]);
  printf("]\nfirst values:");
  for (size_t i = 0; i < n; ++i) {
    if (i < 5) printf(" %g", y[i]);
    if (y[i] > y[best]) best = i;
  }
  printf("\nargmax: %zu (%g)\n", best, y[best]);
  if (argc > 3) write_npy(argv[3], &out);
  kiln_model_free(model);
  return 0;
}
