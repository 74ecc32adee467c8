// Standalone copy-engine concurrency probe (issue 17): N copies at once, each on its own stream
// and timed with its own events against one common start event, for H2D, D2H, half of each, and
// device-local D2D. Equal per-copy end times mean the copies share the engines (fair share);
// ends in steps of asyncEngineCount mean per-engine FIFO.
// Build and run: nvcc -O2 -o ce_concurrency replay/tools/ce_concurrency.cu && ./ce_concurrency
// Output: one line per (test, N): aggregate GB/s (N x bytes / last end) and each copy's end, ms.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

int main() {
  const size_t bytes = size_t(256) << 20;  // 256 MiB per copy
  const int max_n = 8;
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, 0));
  std::printf("device %s asyncEngineCount %d\n", p.name, p.asyncEngineCount);
  std::vector<char*> host(max_n), dev(max_n), dev2(max_n);
  for (int i = 0; i < max_n; ++i) {
    CK(cudaMallocHost(&host[i], bytes));
    for (size_t k = 0; k < bytes; k += 4096) host[i][k] = char(k * 7 + i);
    CK(cudaMalloc(&dev[i], bytes));
    CK(cudaMalloc(&dev2[i], bytes));
    CK(cudaMemset(dev[i], i, bytes));
  }
  std::vector<cudaStream_t> s(max_n + 1);
  for (auto& x : s) CK(cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking));
  std::vector<cudaEvent_t> end(max_n);
  for (auto& e : end) CK(cudaEventCreate(&e));
  cudaEvent_t start;
  CK(cudaEventCreate(&start));
  const char* names[] = {"h2d", "d2h", "mixed", "d2d"};
  for (int test = 0; test < 4; ++test)
    for (int n : {1, 2, 3, 4, 8}) {
      for (int rep = 0; rep < 2; ++rep) {  // rep 0 warms up
        CK(cudaDeviceSynchronize());
        // A common start: every stream waits for one event recorded after a short delay.
        CK(cudaEventRecord(start, s[max_n]));
        for (int i = 0; i < n; ++i) {
          CK(cudaStreamWaitEvent(s[i], start, 0));
          const bool h2d = test == 0 || (test == 2 && i % 2 == 0);
          if (test == 3)
            CK(cudaMemcpyAsync(dev2[i], dev[i], bytes, cudaMemcpyDeviceToDevice, s[i]));
          else if (h2d)
            CK(cudaMemcpyAsync(dev[i], host[i], bytes, cudaMemcpyHostToDevice, s[i]));
          else
            CK(cudaMemcpyAsync(host[i], dev[i], bytes, cudaMemcpyDeviceToHost, s[i]));
          CK(cudaEventRecord(end[i], s[i]));
        }
        CK(cudaDeviceSynchronize());
        if (rep == 0) continue;
        std::vector<float> ms(n);
        for (int i = 0; i < n; ++i) CK(cudaEventElapsedTime(&ms[i], start, end[i]));
        const float last = *std::max_element(ms.begin(), ms.end());
        std::printf("%-5s n=%d aggregate %.1f GB/s ends_ms", names[test], n,
                    double(n) * bytes / (last * 1e-3) / 1e9);
        for (float m : ms) std::printf(" %.2f", m);
        std::printf("\n");
      }
    }
  return 0;
}
