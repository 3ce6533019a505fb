// dynfuse: the CUDA C that codegen.cuda writes, run on the host by a C++ compiler.
//
// Each CUDA thread of a block is a fiber (ucontext) with a stack of its own; the threads of a block
// run one after another, each until it reaches a barrier (__syncthreads, or a warp shuffle, which
// exchanges registers through a table): a barrier lets every thread of the block catch up, in
// thread order, before any goes on. That is the semantics the generated kernels rely on (a block's
// threads all meet every barrier), so a kernel that is right here has the right index arithmetic,
// reductions and shuffles on a GPU. Blocks run one after another; __shared__ arrays are static,
// shared by the block that runs. What differs from a GPU: the math library (the host's libm, not
// CUDA's, each within its documented ulps) and speed (this is for checking, not for running fast).

#include <string.h>
#include <ucontext.h>

// The C math library the kernels call, declared here: C++'s <math.h> takes most of a compile.
#define DF_MATH_1(name) extern "C" double name(double); extern "C" float name##f(float);
#define DF_MATH_2(name) extern "C" double name(double, double); extern "C" float name##f(float, float);
DF_MATH_1(sin) DF_MATH_1(cos) DF_MATH_1(tan) DF_MATH_1(asin) DF_MATH_1(acos) DF_MATH_1(atan)
DF_MATH_1(sinh) DF_MATH_1(cosh) DF_MATH_1(tanh) DF_MATH_1(asinh) DF_MATH_1(acosh) DF_MATH_1(atanh)
DF_MATH_1(exp) DF_MATH_1(exp2) DF_MATH_1(expm1) DF_MATH_1(log) DF_MATH_1(log2) DF_MATH_1(log10)
DF_MATH_1(log1p) DF_MATH_1(sqrt) DF_MATH_1(cbrt) DF_MATH_1(fabs) DF_MATH_1(floor) DF_MATH_1(ceil)
DF_MATH_1(trunc) DF_MATH_1(rint)
DF_MATH_2(atan2) DF_MATH_2(hypot) DF_MATH_2(pow) DF_MATH_2(copysign) DF_MATH_2(fmod)
extern "C" double fma(double, double, double);
extern "C" float fmaf(float, float, float);
static inline bool isinf(double x) { return __builtin_isinf(x); }
static inline bool isinf(float x) { return __builtin_isinf(x); }

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(threads)
#define __shared__ static

struct dim3 {
  unsigned x, y, z;
};
static dim3 threadIdx, blockIdx, blockDim, gridDim;

static inline float __int_as_float(int bits) {
  float value;
  memcpy(&value, &bits, sizeof value);
  return value;
}
static inline int __float_as_int(float value) {
  int bits;
  memcpy(&bits, &value, sizeof bits);
  return bits;
}
static inline double __longlong_as_double(long long bits) {
  double value;
  memcpy(&value, &bits, sizeof value);
  return value;
}
static inline long long __double_as_longlong(double value) {
  long long bits;
  memcpy(&bits, &value, sizeof bits);
  return bits;
}

// float16 by the compiler's _Float16, rounded to nearest even as PTX's cvt.rn
static inline float df_half_to_float(unsigned short bits) {
  _Float16 value;
  memcpy(&value, &bits, sizeof value);
  return (float)value;
}
static inline unsigned short df_float_to_half(float value) {
  _Float16 half = (_Float16)value;
  unsigned short bits;
  memcpy(&bits, &half, sizeof bits);
  return bits;
}
static inline unsigned short df_double_to_half(double value) {  // one rounding
  _Float16 half = (_Float16)value;
  unsigned short bits;
  memcpy(&bits, &half, sizeof bits);
  return bits;
}

namespace df_emulator {

const unsigned MAX_THREADS = 1024;  // of a block
const size_t STACK_BYTES = 64 * 1024;

struct Fiber {
  ucontext_t context;
  bool done;
};

// Fibers and their stacks live in one workspace that the host passes to every launch, shared by
// every kernel module: MAX_THREADS fibers, then their stacks.
extern "C" size_t dynfuse_workspace_bytes() { return MAX_THREADS * (sizeof(Fiber) + STACK_BYTES); }

static ucontext_t scheduler;
static Fiber* fibers;
static char* stacks;
static unsigned current;
static unsigned long long exchange[MAX_THREADS];  // the registers a warp shuffle trades
static void (*body)(void**);
static void** arguments;

static void thread_main() {
  body(arguments);
  fibers[current].done = true;  // then back to the scheduler (uc_link)
}

// Every thread of the block runs until its next barrier, in thread order, until all have returned.
static void run_block(unsigned threads) {
  for (unsigned t = 0; t < threads; ++t) {
    Fiber& fiber = fibers[t];
    getcontext(&fiber.context);
    fiber.context.uc_stack.ss_sp = stacks + t * STACK_BYTES;
    fiber.context.uc_stack.ss_size = STACK_BYTES;
    fiber.context.uc_link = &scheduler;
    fiber.done = false;
    makecontext(&fiber.context, thread_main, 0);
  }
  for (unsigned running = threads; running > 0;) {
    running = 0;
    for (unsigned t = 0; t < threads; ++t) {
      if (fibers[t].done) continue;
      current = t;
      threadIdx.x = t;
      swapcontext(&scheduler, &fibers[t].context);
      running += !fibers[t].done;
    }
  }
}

static inline void barrier() {
  unsigned self = current;
  swapcontext(&fibers[self].context, &scheduler);
  threadIdx.x = self;
}

template <typename T> static inline T trade(T value, unsigned source) {
  unsigned long long bits = 0;
  memcpy(&bits, &value, sizeof value);
  exchange[threadIdx.x] = bits;
  barrier();
  T result;
  memcpy(&result, &exchange[source], sizeof result);
  barrier();  // every thread has read before the table is written again
  return result;
}

// Calls a kernel with its arguments as cuLaunchKernel takes them: each entry points at a value.
template <typename... A> struct Call;
template <> struct Call<> {
  template <typename F, typename... Done> static void with(F kernel, void**, Done... done) { kernel(done...); }
};
template <typename First, typename... Rest> struct Call<First, Rest...> {
  template <typename F, typename... Done> static void with(F kernel, void** values, Done... done) {
    Call<Rest...>::with(kernel, values + 1, done..., *static_cast<First*>(values[0]));
  }
};

// A launch of ``kernel`` on ``grid`` blocks of ``block`` threads, its arguments as cuLaunchKernel
// takes them (each entry points at the argument's value). Returns 0, or -1 for too many threads.
template <typename... A>
static int launch(void (*kernel)(A...), unsigned grid, unsigned block, void** values, char* workspace) {
  static void (*launched)(A...);
  if (block == 0 || block > MAX_THREADS) return -1;
  launched = kernel;
  body = [](void** given) { Call<A...>::with(launched, given); };
  arguments = values;
  fibers = reinterpret_cast<Fiber*>(workspace);
  stacks = workspace + MAX_THREADS * sizeof(Fiber);
  gridDim.x = grid, gridDim.y = gridDim.z = 1;
  blockDim.x = block, blockDim.y = blockDim.z = 1;
  threadIdx.y = threadIdx.z = blockIdx.y = blockIdx.z = 0;
  for (unsigned b = 0; b < grid; ++b) {
    blockIdx.x = b;
    run_block(block);
  }
  return 0;
}

}  // namespace df_emulator

static inline void __syncthreads() { df_emulator::barrier(); }
// One fiber runs at a time: an atomic read-modify-write is a plain one
static inline unsigned long long atomicOr(unsigned long long* address, unsigned long long value) {
  const unsigned long long old = *address;
  *address = old | value;
  return old;
}

template <typename T> static inline T __shfl_down_sync(unsigned, T value, unsigned delta, int width = 32) {
  unsigned lane = threadIdx.x % width;
  return df_emulator::trade(value, lane + delta < (unsigned)width ? threadIdx.x + delta : threadIdx.x);
}
template <typename T> static inline T __shfl_sync(unsigned, T value, int source, int width = 32) {
  return df_emulator::trade(value, threadIdx.x - threadIdx.x % width + source % width);
}

// What the emulator appends for each kernel: the entry the host calls, ``<kernel>_launch``.
#define DF_EMULATOR_ENTRY(kernel)                                                                     \
  extern "C" int kernel##_launch(unsigned grid, unsigned block, void** values, char* workspace) {     \
    return df_emulator::launch(kernel, grid, block, values, workspace);                               \
  }
