#pragma once
// One checking macro family for every CUDA and NCCL call (STYLE habit 6). Each returns, from the
// enclosing function (which returns Status or Result<T>), an Error with exit code 1 naming the
// call, the error and file:line:
//   "cuda: cudaMemcpyAsync(...) failed: cudaErrorInvalidValue (invalid argument) at replay/x.cu:12"
#include <cuda_runtime.h>

#include <string>

#include "sparsp/status.hpp"

#ifdef SPARSP_HAVE_NCCL
#include <nccl.h>
#endif

namespace sparsp::replay::detail {

inline Error cuda_error(const char* call, cudaError_t e, const char* file, int line) {
  return Error{std::string("cuda: ") + call + " failed: " + cudaGetErrorName(e) + " (" +
                   cudaGetErrorString(e) + ") at " + file + ":" + std::to_string(line),
               1};
}

#ifdef SPARSP_HAVE_NCCL
inline Error nccl_error(const char* call, ncclResult_t e, const char* file, int line) {
  return Error{std::string("nccl: ") + call + " failed: " + ncclGetErrorString(e) + " at " + file +
                   ":" + std::to_string(line),
               1};
}
#endif

}  // namespace sparsp::replay::detail

/// Evaluates a CUDA runtime call; on failure returns the error from the enclosing function.
#define SPARSP_CUDA_TRY(expr)                                                            \
  do {                                                                                   \
    const cudaError_t sparsp_e_ = (expr);                                                \
    if (sparsp_e_ != cudaSuccess)                                                        \
      return ::sparsp::replay::detail::cuda_error(#expr, sparsp_e_, __FILE__, __LINE__); \
  } while (0)

/// After a kernel launch: checks the launch error; `kernel` is a string literal naming it.
#define SPARSP_CUDA_TRY_LAUNCH(kernel)                                                      \
  do {                                                                                      \
    const cudaError_t sparsp_e_ = cudaGetLastError();                                       \
    if (sparsp_e_ != cudaSuccess)                                                           \
      return ::sparsp::replay::detail::cuda_error("launch of " kernel, sparsp_e_, __FILE__, \
                                                  __LINE__);                                \
  } while (0)

/// Evaluates a call returning Status / Result; forwards its error.
#define SPARSP_TRY(expr)                      \
  do {                                        \
    auto sparsp_s_ = (expr);                  \
    if (!sparsp_s_) return sparsp_s_.error(); \
  } while (0)

#ifdef SPARSP_HAVE_NCCL
#define SPARSP_NCCL_TRY(expr)                                                            \
  do {                                                                                   \
    const ncclResult_t sparsp_n_ = (expr);                                               \
    if (sparsp_n_ != ncclSuccess)                                                        \
      return ::sparsp::replay::detail::nccl_error(#expr, sparsp_n_, __FILE__, __LINE__); \
  } while (0)
#endif
