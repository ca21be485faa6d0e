/* kiln C API: load a model (an ahead-of-time compiled kiln library, or an ONNX file with the
 * full libkiln), query its inputs and outputs, and run it on caller-owned buffers.
 *
 * Pure C (C99 and C++), no exceptions or C++ types cross it. Every function that can fail
 * returns a kiln_status; on failure, kiln_last_error() gives a message for the calling thread.
 *
 * Libraries that implement it:
 *   libkiln.so          everything: ONNX models (compiled in process, JIT) and compiled models;
 *   libkiln_runtime.so  compiled models only (`kiln compile MODEL -o model.so`), small, no LLVM;
 *   model.so            a compiled model itself exports this API (kiln_model_load_embedded).
 *
 * Thread safety: kiln_run may be called on one model from several threads at once (runs on one
 * model are serialized by a mutex; use one model per thread for parallel runs); kiln_cancel may
 * be called from any thread at any time (docs/c_api.md). Loading and
 * freeing different models concurrently is safe; kiln_model_free must not race with other
 * calls on the same model. Metadata queries are safe at any time.
 *
 * Usage (error checks elided):
 *   kiln_model* m;
 *   kiln_model_load_file("resnet50.so", NULL, &m);
 *   kiln_tensor in = {KILN_DTYPE_FLOAT32, 4, {1, 3, 224, 224}, x, sizeof x};
 *   kiln_tensor out = {KILN_DTYPE_FLOAT32, 0, {0}, y, sizeof y};
 *   if (kiln_run(m, &in, 1, &out, 1) != KILN_OK) fprintf(stderr, "%s\n", kiln_last_error());
 *   kiln_model_free(m);
 * Docs: docs/c_api.md */
#ifndef KILN_C_API_H_
#define KILN_C_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any incompatible change of this header; kiln_api_version() returns the library's. */
#define KILN_C_API_VERSION 1

#if defined(KILN_BUILDING_C_API)
#define KILN_API __attribute__((visibility("default")))
#else
#define KILN_API
#endif

#define KILN_MAX_RANK 8

typedef enum kiln_status {
  KILN_OK = 0,
  KILN_ERROR_INTERNAL = 1,          /* a bug in kiln */
  KILN_ERROR_INVALID_ARGUMENT = 2,  /* API misuse: null pointers, bad index, missing file */
  KILN_ERROR_INVALID_MODEL = 3,     /* malformed or truncated model */
  KILN_ERROR_UNSUPPORTED = 4,       /* valid model using something this library does not support */
  KILN_ERROR_BAD_INPUT = 5,         /* tensors that do not fit the model (dtype, shape, size) */
  KILN_ERROR_CANCELLED = 6,         /* the run was cancelled (kiln_cancel) */
  KILN_ERROR_TIMEOUT = 7,           /* the run took longer than kiln_options.run_timeout_ms */
  KILN_ERROR_RESOURCE_LIMIT = 8     /* the model or these inputs need more than max_memory_bytes */
} kiln_status;

/* Element types; the values are ONNX TensorProto.DataType codes. */
typedef enum kiln_dtype {
  KILN_DTYPE_UNDEFINED = 0,
  KILN_DTYPE_FLOAT32 = 1,
  KILN_DTYPE_UINT8 = 2,
  KILN_DTYPE_INT8 = 3,
  KILN_DTYPE_UINT16 = 4,
  KILN_DTYPE_INT16 = 5,
  KILN_DTYPE_INT32 = 6,
  KILN_DTYPE_INT64 = 7,
  KILN_DTYPE_BOOL = 9,
  KILN_DTYPE_FLOAT16 = 10,
  KILN_DTYPE_FLOAT64 = 11,
  KILN_DTYPE_UINT32 = 12,
  KILN_DTYPE_UINT64 = 13,
  KILN_DTYPE_BFLOAT16 = 16
} kiln_dtype;

typedef struct kiln_model kiln_model; /* opaque */

/* Load options; pass NULL for the defaults. */
typedef struct kiln_options {
  uint32_t struct_size; /* sizeof(kiln_options) */
  int32_t threads;      /* threads of the model's pool (0: all hardware threads; default 1) */
  /* Compiled models: 1 packs the GEMM weights into the microkernels' layout during the load;
   * 0 (default) packs each layer's on its first run, so that loading is fast and the first
   * kiln_run pays the packing once. Results are the same. */
  int32_t pack_weights_at_load;
  /* Memory budget in bytes (0: none): the weights, packed GEMM weights, activation arenas and
   * outputs kiln plans for the model. A load or run that would pass it fails with
   * KILN_ERROR_RESOURCE_LIMIT before allocating, naming the numbers (docs/c_api.md). */
  int64_t max_memory_bytes;
  /* Deadline of each kiln_run in milliseconds (0: none): a run past it stops between two steps
   * and returns KILN_ERROR_TIMEOUT; the model stays usable. */
  int64_t run_timeout_ms;
  /* ONNX models: tuning records from `kiln tune` (a JSON-lines file or a directory, NULL: none;
   * docs/tuning.md, experimental): the kernel choices they hold for this CPU and `threads` are
   * applied. Compiled libraries keep the choices they were compiled with and ignore it. */
  const char* records;
  /* ONNX models: external backends to offload the regions they support to, comma-separated,
   * first choice first ("dnnl": oneDNN; NULL or "": none; docs/byoc.md, experimental). An
   * unknown name fails the load with KILN_ERROR_INVALID_ARGUMENT. */
  const char* offload;
} kiln_options;
#define KILN_OPTIONS_INIT {sizeof(kiln_options), 1, 0, 0, 0, NULL, NULL}

/* An input or output as the model declares it. `name` and `dims` stay valid as long as the
 * model; a dim of -1 is symbolic (ONNX models; compiled models: a dim that differs between the
 * signatures the library was compiled for, see kiln_model_num_signatures). */
typedef struct kiln_tensor_info {
  const char* name;
  kiln_dtype dtype;
  int32_t rank;
  const int64_t* dims;
} kiln_tensor_info;

/* A caller-owned tensor. Inputs: dtype, rank, dims and data of `size_bytes` bytes (dense,
 * row-major) are read. Outputs: dtype must match the model's and `size_bytes` must hold the
 * output; kiln_run writes the data and sets rank and dims. Compiled models check the sizes
 * before running: when an output's `size_bytes` is too small (0 with any `data`, to ask), the
 * run fails with KILN_ERROR_BAD_INPUT and sets that output's rank and dims, so a caller of a
 * library with several signatures can allocate and call again. */
typedef struct kiln_tensor {
  kiln_dtype dtype;
  int32_t rank;
  int64_t dims[KILN_MAX_RANK];
  void* data;
  size_t size_bytes;
} kiln_tensor;

/* KILN_C_API_VERSION of the library (compare with the header's to detect a mismatch). */
KILN_API int kiln_api_version(void);
/* The message of the last failed call on this thread ("" if none); valid until the next call. */
KILN_API const char* kiln_last_error(void);
KILN_API const char* kiln_status_name(kiln_status status);
KILN_API size_t kiln_dtype_size(kiln_dtype dtype); /* bytes per element; 0 if unknown */

/* Loads a compiled model library (`kiln compile MODEL -o model.so`) or, with libkiln, an ONNX
 * file (compiled on first run for the input shapes it gets). */
KILN_API kiln_status kiln_model_load_file(const char* path, const kiln_options* options, kiln_model** out);
/* Same from bytes in memory (copied; the caller may free them after the call). */
KILN_API kiln_status kiln_model_load_memory(const void* data, size_t size, const kiln_options* options,
                                            kiln_model** out);
/* In a compiled model library (linked directly): loads the model it embeds. Elsewhere
 * KILN_ERROR_UNSUPPORTED. */
KILN_API kiln_status kiln_model_load_embedded(const kiln_options* options, kiln_model** out);
/* Frees the model (NULL is ignored). */
KILN_API void kiln_model_free(kiln_model* model);

KILN_API size_t kiln_model_num_inputs(const kiln_model* model);
KILN_API size_t kiln_model_num_outputs(const kiln_model* model);
KILN_API kiln_status kiln_model_input_info(const kiln_model* model, size_t index, kiln_tensor_info* out);
KILN_API kiln_status kiln_model_output_info(const kiln_model* model, size_t index, kiln_tensor_info* out);

/* Compiled models: the input-shape signatures the library was compiled for (`kiln compile -o`
 * with `--dim NAME=V1,V2,...` makes one per combination of sizes); a run's inputs must have the
 * shapes of one of them. ONNX models: 0 (any shapes the graph allows). */
KILN_API size_t kiln_model_num_signatures(const kiln_model* model);
/* Input `index` as signature `signature` has it (every dim known). */
KILN_API kiln_status kiln_model_signature_input(const kiln_model* model, size_t signature, size_t index,
                                                kiln_tensor_info* out);

/* Runs the model: `inputs` in the model's input order, `outputs` in its output order (their
 * data filled in place). Nothing is allocated for the outputs. */
KILN_API kiln_status kiln_run(kiln_model* model, const kiln_tensor* inputs, size_t num_inputs, kiln_tensor* outputs,
                              size_t num_outputs);

/* Cancels the runs of `model` that started before this call (running, or waiting for the
 * model's lock): they stop between two steps and return KILN_ERROR_CANCELLED, with the output
 * buffers' contents unspecified. Later runs are not affected, and the model stays usable. Safe
 * to call from any thread while runs are in progress (not concurrently with kiln_model_free);
 * NULL is ignored. */
KILN_API void kiln_cancel(kiln_model* model);

#ifdef __cplusplus
}
#endif

#endif /* KILN_C_API_H_ */
