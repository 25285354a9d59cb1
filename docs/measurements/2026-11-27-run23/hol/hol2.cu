// HOL probe: B's driver calls while thread A waits on a busy stream, A spinning or blocking.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>
#include <algorithm>
#include <cuda.h>
#include <cuda_runtime.h>
__global__ void spin(long long cycles, unsigned long long *ns) { long long t = clock64(); while (clock64() - t < cycles) ; if (ns) *ns = 1; }
__global__ void empty_kernel() {}
static double now_us() { return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
static double med(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size()/2]; }
int main() {
  int khz = 0; cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0);
  cudaStream_t busy, idle; cudaStreamCreateWithFlags(&busy, cudaStreamNonBlocking); cudaStreamCreateWithFlags(&idle, cudaStreamNonBlocking);
  empty_kernel<<<1,1,0,idle>>>(); cudaDeviceSynchronize();
  CUcontext ctx; cuCtxGetCurrent(&ctx);
  CUevent ev; cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING);
  const char *mode[] = {"alone", "A: cuStreamSynchronize", "A: blocking-sync event", "A: cuEventQuery poll"};
  for (int with = 0; with < 4; with++) {
    std::atomic<int> st{0};
    std::thread a;
    if (with) { a = std::thread([&]{ cuCtxSetCurrent(ctx); spin<<<1,1,0,busy>>>((long long)khz*1000, nullptr);
        CUevent e; cuEventCreate(&e, with == 2 ? (CU_EVENT_DISABLE_TIMING|CU_EVENT_BLOCKING_SYNC) : CU_EVENT_DISABLE_TIMING); cuEventRecord(e, (CUstream)busy);
        st=1;
        if (with == 1) cuStreamSynchronize((CUstream)busy);
        else if (with == 2) cuEventSynchronize(e);
        else while (cuEventQuery(e) == CUDA_ERROR_NOT_READY) ;
        st=2; cuEventDestroy(e); });
      while (!st.load()) std::this_thread::yield(); std::this_thread::sleep_for(std::chrono::milliseconds(20)); }
    std::vector<double> q, s, r, l;
    for (int i = 0; i < 100; i++) {
      double t = now_us(); cuStreamQuery((CUstream)idle); q.push_back(now_us()-t);
      t = now_us(); cuStreamSynchronize((CUstream)idle); s.push_back(now_us()-t);
      t = now_us(); cuEventRecord(ev, (CUstream)idle); cuEventQuery(ev); r.push_back(now_us()-t);
      t = now_us(); empty_kernel<<<1,1,0,idle>>>(); cuStreamSynchronize((CUstream)idle); l.push_back(now_us()-t);
    }
    printf("%-26s query %7.1f us, idle sync %7.1f us, record+query %7.1f us, launch+sync %7.1f us (A still waiting: %d)\n", mode[with], med(q), med(s), med(r), med(l), with ? (st.load()==1) : -1);
    fflush(stdout);
    if (with) a.join();
  }
  return 0;
}
