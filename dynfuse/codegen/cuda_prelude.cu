// dynfuse: NumPy's scalar semantics as CUDA device functions, included in every generated kernel.
// Compiled with NVRTC without headers (no <cuda_fp16.h>: float16 is converted by PTX's cvt) and
// without fast math or FMA contraction, so each op rounds as NumPy's loop does.

typedef signed char df_i8;
typedef unsigned char df_u8;
typedef short df_i16;
typedef unsigned short df_u16;
typedef int df_i32;
typedef unsigned int df_u32;
typedef long long df_i64;
typedef unsigned long long df_u64;

// ---- packs: N consecutive elements of a contiguous array, loaded and stored in vector words of up
// to 16 bytes (one ld.global.v4 / st.global.v4 each, as CUDA's uint4), where every array of the
// kernel is aligned to its word
template <int BYTES> struct df_word;
template <> struct alignas(16) df_word<16> { df_u32 x, y, z, w; };
template <> struct alignas(8) df_word<8> { df_u32 x, y; };
template <> struct df_word<4> { df_u32 x; };
template <> struct df_word<2> { df_u16 x; };
template <> struct df_word<1> { df_u8 x; };

template <typename T, int N> struct df_pack {
  static constexpr int BYTES = (int)sizeof(T) * N;
  static constexpr int WORD = BYTES < 16 ? BYTES : 16;
  typedef df_word<WORD> Word;
  union {
    T e[N];
    Word words[BYTES / WORD];
  };
  __device__ __forceinline__ static bool aligned(const void* address) {
    return (unsigned long long)address % WORD == 0;
  }
  __device__ __forceinline__ void load(const T* from) {
    const Word* source = reinterpret_cast<const Word*>(from);
#pragma unroll
    for (int k = 0; k < BYTES / WORD; ++k) words[k] = source[k];
  }
  __device__ __forceinline__ void store(T* to) const {
    Word* target = reinterpret_cast<Word*>(to);
#pragma unroll
    for (int k = 0; k < BYTES / WORD; ++k) target[k] = words[k];
  }
};

// ---- float16: stored as its bits, computed in float, rounded once per op as NumPy's half loops.
// The GPU's cvt gives a NaN the canonical positive NaN; NumPy's conversions keep its sign (which
// copysign and signbit read) and the top of its payload, quieted, as the x86 conversions do.
#ifdef __CUDA_ARCH__
__device__ __forceinline__ float df_half_to_float(df_u16 bits) {
  if ((bits & 0x7c00u) == 0x7c00u && (bits & 0x03ffu) != 0u)
    return __uint_as_float(((df_u32)(bits & 0x8000u) << 16) | 0x7fc00000u | ((df_u32)(bits & 0x03ffu) << 13));
  float value;
  asm("cvt.f32.f16 %0, %1;" : "=f"(value) : "h"(bits));
  return value;
}
__device__ __forceinline__ df_u16 df_float_to_half(float value) {
  if (isnan(value)) {
    const df_u32 word = __float_as_uint(value);
    return (df_u16)(((word >> 16) & 0x8000u) | 0x7e00u | ((word >> 13) & 0x03ffu));
  }
  df_u16 bits;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(bits) : "f"(value));
  return bits;
}
__device__ __forceinline__ df_u16 df_double_to_half(double value) {  // one rounding, as NumPy's
  if (isnan(value)) {
    const unsigned long long word = (unsigned long long)__double_as_longlong(value);
    return (df_u16)(((word >> 48) & 0x8000u) | 0x7e00u | ((word >> 42) & 0x03ffu));
  }
  df_u16 bits;
  asm("cvt.rn.f16.f64 %0, %1;" : "=h"(bits) : "d"(value));
  return bits;
}
#endif  // on the host, backends/cuda_emulator.h converts
__device__ __forceinline__ float df_round_half(float value) { return df_half_to_float(df_float_to_half(value)); }
__device__ __forceinline__ float df_round_half(double value) { return df_half_to_float(df_double_to_half(value)); }

// ---- integers: wrapping arithmetic without C's undefined signed overflow
template <typename T> struct df_unsigned_of { typedef T type; };
template <> struct df_unsigned_of<df_i8> { typedef df_u32 type; };
template <> struct df_unsigned_of<df_u8> { typedef df_u32 type; };
template <> struct df_unsigned_of<df_i16> { typedef df_u32 type; };
template <> struct df_unsigned_of<df_u16> { typedef df_u32 type; };
template <> struct df_unsigned_of<df_i32> { typedef df_u32 type; };
template <> struct df_unsigned_of<df_i64> { typedef df_u64 type; };

template <typename T> __device__ __forceinline__ T df_wrap_add(T x, T y) {
  typedef typename df_unsigned_of<T>::type U;
  return (T)((U)x + (U)y);
}
template <typename T> __device__ __forceinline__ T df_wrap_sub(T x, T y) {
  typedef typename df_unsigned_of<T>::type U;
  return (T)((U)x - (U)y);
}
template <typename T> __device__ __forceinline__ T df_wrap_mul(T x, T y) {
  typedef typename df_unsigned_of<T>::type U;
  return (T)((U)x * (U)y);
}
template <typename T> __device__ __forceinline__ T df_wrap_neg(T x) {
  typedef typename df_unsigned_of<T>::type U;
  return (T)(-(U)x);
}

// NumPy 2: division by zero gives 0; MIN // -1 wraps; floor semantics for // and %
template <typename T> __device__ __forceinline__ T df_int_floor_divide(T x, T y, bool is_signed) {
  if (y == 0) return 0;
  if (is_signed && y == (T)-1) return df_wrap_neg(x);
  T quotient = x / y, rest = x % y;
  if (is_signed && rest != 0 && ((rest < 0) != (y < 0))) quotient -= 1;
  return quotient;
}
template <typename T> __device__ __forceinline__ T df_int_remainder(T x, T y, bool is_signed) {
  if (y == 0) return 0;
  if (is_signed && y == (T)-1) return 0;
  T rest = x % y;
  if (is_signed && rest != 0 && ((rest < 0) != (y < 0))) rest += y;
  return rest;
}
template <typename T> __device__ __forceinline__ T df_int_fmod(T x, T y, bool is_signed) {
  if (y == 0) return 0;
  if (is_signed && y == (T)-1) return 0;
  return x % y;
}
template <typename T> __device__ __forceinline__ T df_int_power(T base, T exponent) {
  T result = 1;
  typedef typename df_unsigned_of<T>::type U;
  U remaining = (U)exponent;  // negative exponents were refused when the op was recorded
  while (remaining != 0) {
    if (remaining & 1) result = df_wrap_mul(result, base);
    base = df_wrap_mul(base, base);
    remaining >>= 1;
  }
  return result;
}
// shifts past the width (or by a negative count) give 0, or -1 for a negative signed right shift
template <typename T> __device__ __forceinline__ T df_left_shift(T x, T y, int width) {
  typedef typename df_unsigned_of<T>::type U;
  return ((df_u64)(df_i64)y < (df_u64)width) ? (T)((U)x << y) : (T)0;
}
template <typename T> __device__ __forceinline__ T df_right_shift(T x, T y, int width, bool is_signed) {
  if ((df_u64)(df_i64)y < (df_u64)width) return (T)(x >> y);
  return (is_signed && x < 0) ? (T)-1 : (T)0;
}

// A rolled load's position along an axis: the coordinate moved by start, around an extent of modulus
__device__ __forceinline__ df_i64 df_wrap(df_i64 coordinate, df_i64 start, df_i64 modulus) {
  const df_i64 moved = coordinate + start;
  return moved >= modulus ? moved - modulus : moved;
}

// A gathering load's position along an axis of extent elements: a negative index from the end. An
// index is checked where it is written; one that memory NumPy can see changed since (its bounds
// checked no more) reads the first element, never outside the array.
__device__ __forceinline__ df_i64 df_position(df_i64 index, df_i64 extent) {
  const df_i64 position = index < 0 ? index + extent : index;
  return (df_u64)position < (df_u64)extent ? position : 0;
}

// x86's truncating conversions, which NumPy's loops give: the lowest integer when out of range
__device__ __forceinline__ df_i32 df_truncate32(double value) {
  return (value >= -2147483648.0 && value < 2147483648.0) ? (df_i32)value : (df_i32)0x80000000;
}
__device__ __forceinline__ df_i64 df_truncate64(double value) {
  return (value >= -9223372036854775808.0 && value < 9223372036854775808.0) ? (df_i64)value
                                                                              : (df_i64)0x8000000000000000LL;
}
__device__ __forceinline__ df_u64 df_truncate_u64(double value) {
  if (value >= 9223372036854775808.0)
    return (df_u64)df_truncate64(value - 9223372036854775808.0) ^ 0x8000000000000000ULL;
  return (df_u64)df_truncate64(value);
}

// ---- floats
// A function of float and of double, as the math library's of each (``sinf`` and ``sin``)
#define DF_FLOAT_OVERLOADS_1(ours, library)                                          \
  __device__ __forceinline__ float ours(float x) { return library##f(x); }          \
  __device__ __forceinline__ double ours(double x) { return library(x); }
#define DF_FLOAT_OVERLOADS_2(ours, library)                                          \
  __device__ __forceinline__ float ours(float x, float y) { return library##f(x, y); } \
  __device__ __forceinline__ double ours(double x, double y) { return library(x, y); }
__device__ __forceinline__ bool df_isnan(float x) { return x != x; }
__device__ __forceinline__ bool df_isnan(double x) { return x != x; }
template <typename T> __device__ __forceinline__ bool df_isfinite(T x) { return x - x == 0; }
// Floating-point errors: a GPU keeps no IEEE flags, so an op NumPy's loop could report judges its
// value and its operands': NumPy's bits (float_errors), which each thread ORs into the kernel's
// word at its end. NaN from numbers is invalid; an infinity from finite numbers a pole or an
// overflow; a value below ``tiny`` in magnitude (zero included) from finite nonzero numbers an
// underflow (``tiny`` 0: an exact op, which never underflows). Reporting what NumPy would not costs
// a rerun by NumPy (interpret.rerun_for_errors), never a wrong report.
enum { DF_DIVIDE = 1, DF_OVERFLOW = 2, DF_UNDERFLOW = 4, DF_INVALID = 8 };
template <typename T>
__device__ __forceinline__ unsigned df_raised(T value, T tiny, bool nan_read, bool finite_read, bool nonzero_read) {
  unsigned raised = 0;
  if (df_isnan(value) && !nan_read) raised |= DF_INVALID;
  if (isinf(value) && finite_read) raised |= DF_DIVIDE | DF_OVERFLOW;
  if (value < tiny && value > -tiny && finite_read && nonzero_read) raised |= DF_UNDERFLOW;
  return raised;
}
__device__ __forceinline__ bool df_signbit(float x) { return __float_as_int(x) < 0; }
__device__ __forceinline__ bool df_signbit(double x) { return __double_as_longlong(x) < 0; }

// maximum/minimum propagate NaN, fmax/fmin ignore it; on equal operands NumPy's float16 loops
// give the first, its float32/64 loops the second
template <typename T> __device__ __forceinline__ T df_maximum(T x, T y, bool half) {
  return ((half ? x >= y : x > y) || df_isnan(x)) ? x : y;
}
template <typename T> __device__ __forceinline__ T df_minimum(T x, T y, bool half) {
  return ((half ? x <= y : x < y) || df_isnan(x)) ? x : y;
}
template <typename T> __device__ __forceinline__ T df_fmax(T x, T y, bool half) {
  return ((half ? x >= y : x > y) || df_isnan(y)) ? x : y;
}
template <typename T> __device__ __forceinline__ T df_fmin(T x, T y, bool half) {
  return ((half ? x <= y : x < y) || df_isnan(y)) ? x : y;
}
template <typename T> __device__ __forceinline__ T df_clip(T x, T low, T high, bool half, bool scalar_bounds) {
  // max(x, low) then min(., high), NaN-propagating, with NumPy's ties between signed zeros
  bool above = (half || scalar_bounds) ? x >= low : x > low;
  T value = (above || df_isnan(x)) ? x : low;
  bool below = half ? value <= high : value < high;
  if (scalar_bounds && !half) below = below || (value == high && df_signbit(value));
  return (below || df_isnan(value)) ? value : high;
}
template <typename T> __device__ __forceinline__ T df_sign(T x) {
  if (df_isnan(x)) return x;
  return x > (T)0 ? (T)1 : (x < (T)0 ? (T)-1 : (T)0);
}
template <typename T> __device__ __forceinline__ T df_heaviside(T x, T at_zero) {
  if (df_isnan(x)) return x;
  return x < (T)0 ? (T)0 : (x == (T)0 ? at_zero : (T)1);
}

// NumPy's npy_divmod: Python's floor semantics, with its own rules for zeros and NaN
DF_FLOAT_OVERLOADS_2(df_fmod, fmod)
DF_FLOAT_OVERLOADS_1(df_floor, floor)
DF_FLOAT_OVERLOADS_2(df_copysign, copysign)
template <typename T> __device__ __forceinline__ T df_float_remainder(T x, T y) {
  T mod = df_fmod(x, y);
  if (y == (T)0) return mod;
  if (mod != (T)0) return ((y < (T)0) != (mod < (T)0)) ? mod + y : mod;
  return df_copysign((T)0, y);
}
template <typename T> __device__ __forceinline__ T df_float_floor_divide(T x, T y) {
  if (y == (T)0) return x / y;
  T mod = df_fmod(x, y);
  T div = (x - mod) / y;
  if (mod != (T)0 && ((y < (T)0) != (mod < (T)0))) div -= (T)1;
  if (div != (T)0) {
    T floor = df_floor(div);
    return (div - floor > (T)0.5) ? floor + (T)1 : floor;
  }
  return df_copysign((T)0, x / y);
}

// CUDA's double hypot overflows to inf near DBL_MAX where the result is finite (hypot(DBL_MAX, 1));
// there the larger magnitude times sqrt(1 + r * r), r the smaller one's ratio to it, is within 2 ulp.
__device__ __forceinline__ float df_hypot(float x, float y) { return hypotf(x, y); }
__device__ __forceinline__ double df_hypot(double x, double y) {
  const double result = hypot(x, y);
  if (!(result > 1.7976931348623157e308) || x - x != 0.0 || y - y != 0.0) return result;  // inf or NaN in
  const double ax = fabs(x), ay = fabs(y);
  const double big = ax > ay ? ax : ay, ratio = (ax > ay ? ay : ax) / big;
  return big * sqrt(1.0 + ratio * ratio);
}

// NumPy's npy_logaddexp / npy_logaddexp2, branch for branch
DF_FLOAT_OVERLOADS_1(df_log1p, log1p)
DF_FLOAT_OVERLOADS_1(df_exp, exp)
DF_FLOAT_OVERLOADS_1(df_exp2, exp2)
template <typename T> __device__ __forceinline__ T df_logaddexp(T x, T y) {
  if (x == y) return x + (T)0.693147180559945309417;
  T difference = x - y;
  if (difference > (T)0) return x + df_log1p(df_exp(-difference));
  if (difference <= (T)0) return y + df_log1p(df_exp(difference));
  return difference;
}
template <typename T> __device__ __forceinline__ T df_logaddexp2(T x, T y) {
  if (x == y) return x + (T)1;
  T difference = x - y;
  if (difference > (T)0) return x + df_log1p(df_exp2(-difference)) * (T)1.44269504088896340736;
  if (difference <= (T)0) return y + df_log1p(df_exp2(difference)) * (T)1.44269504088896340736;
  return difference;
}

// NumPy's float32/64 power by one value: 0.5, 2 and -1 are sqrt, square and reciprocal
__device__ __forceinline__ float df_power_by_one_value(float x, float y) {
  return y == 0.5f ? sqrtf(x) : (y == 2.0f ? x * x : (y == -1.0f ? 1.0f / x : powf(x, y)));
}
__device__ __forceinline__ double df_power_by_one_value(double x, double y) {
  return y == 0.5 ? sqrt(x) : (y == 2.0 ? x * x : (y == -1.0 ? 1.0 / x : pow(x, y)));
}
// x**3 within half an ulp and a hair, as pow: a float32 square is exact in double, so the cube rounds
// there once; a float64 square splits into its rounded value and the exact error (an fma), and the cube
// is one fma of the two, unless the square overflows (the split would give inf - inf).
__device__ __forceinline__ float df_cube(float x) {
  double wide = (double)x;
  return (float)(wide * wide * wide);
}
__device__ __forceinline__ double df_cube(double x) {
  double square = x * x;
  if (isinf(square)) return square * x;
  return fma(square, x, fma(x, x, -square) * x);
}
// x ** e for e = -0.5, 1.5, -1.5, within two ulp of pow: 1/sqrt(x), x*sqrt(x), (1/x)/sqrt(x), and pow's
// values where those differ (+inf at -0.0 for -0.5; +inf or +0 at -inf, whose root is NaN); a float is
// taken in double and rounded once, within one ulp, as the host's kernels do
__device__ __forceinline__ double df_half_power(double x, double e) {
  double root = sqrt(x);
  double result = e == 1.5 ? x * root : (e == -0.5 ? 1.0 / root : (1.0 / x) / root);
  if (e == -0.5 && x == 0.0) return 1.0 / (x * x);
  if (isinf(x) && x < 0.0) return e > 0 ? -x : 0.0;
  return result;
}
__device__ __forceinline__ float df_half_power(float x, double e) { return (float)df_half_power((double)x, e); }

// ---- complex: a pair of floats as in memory (real part, then imaginary), computed as NumPy's
// complex loops compute it. Where those loops round a*b + c once (SIMD loops with FMA:
// common.complex_loops_fuse) the generator passes ``fused`` true; a reduction's in-place loop,
// which rounds each product, passes false.
template <typename T> struct df_complex {
  T re, im;
};
typedef df_complex<float> df_c64;
typedef df_complex<double> df_c128;
__device__ __forceinline__ float df_fma(float x, float y, float z) { return fmaf(x, y, z); }
__device__ __forceinline__ double df_fma(double x, double y, double z) { return fma(x, y, z); }
DF_FLOAT_OVERLOADS_1(df_fabs, fabs)
DF_FLOAT_OVERLOADS_1(df_sqrt, sqrt)
__device__ __forceinline__ float df_infinity(float) { return __int_as_float(0x7f800000); }
__device__ __forceinline__ double df_infinity(double) { return __longlong_as_double(0x7ff0000000000000LL); }
template <typename T> __device__ __forceinline__ T df_multiply_add(T x, T y, T z, bool fused) {
  return fused ? df_fma(x, y, z) : x * y + z;
}
template <typename T> __device__ __forceinline__ bool operator==(df_complex<T> x, df_complex<T> y) {
  return x.re == y.re && x.im == y.im;
}
template <typename T> __device__ __forceinline__ bool operator!=(df_complex<T> x, df_complex<T> y) {
  return x.re != y.re || x.im != y.im;
}
template <typename T> __device__ __forceinline__ bool df_isnan(df_complex<T> z) { return df_isnan(z.re) || df_isnan(z.im); }
template <typename T> __device__ __forceinline__ bool df_isinf(df_complex<T> z) { return isinf(z.re) || isinf(z.im); }
template <typename T> __device__ __forceinline__ bool df_isfinite(df_complex<T> z) {
  return df_isfinite(z.re) && df_isfinite(z.im);
}
template <typename T> __device__ __forceinline__ bool df_nonzero(T x) { return x != 0; }
template <typename T> __device__ __forceinline__ bool df_nonzero(df_complex<T> z) { return z.re != 0 || z.im != 0; }
template <typename T> __device__ __forceinline__ df_complex<T> df_cadd(df_complex<T> x, df_complex<T> y) {
  return df_complex<T>{x.re + y.re, x.im + y.im};
}
template <typename T> __device__ __forceinline__ df_complex<T> df_csub(df_complex<T> x, df_complex<T> y) {
  return df_complex<T>{x.re - y.re, x.im - y.im};
}
template <typename T> __device__ __forceinline__ df_complex<T> df_cneg(df_complex<T> z) {
  return df_complex<T>{-z.re, -z.im};
}
template <typename T> __device__ __forceinline__ df_complex<T> df_cconj(df_complex<T> z) {
  return df_complex<T>{z.re, -z.im};
}
template <typename T> __device__ __forceinline__ T df_csquared_magnitude(df_complex<T> z) {
  return z.re * z.re + z.im * z.im;
}
template <typename T> __device__ __forceinline__ df_complex<T> df_cmul(df_complex<T> x, df_complex<T> y, bool fused) {
  return df_complex<T>{df_multiply_add(x.re, y.re, -(x.im * y.im), fused),
                       df_multiply_add(x.re, y.im, x.im * y.re, fused)};
}
template <typename T> __device__ __forceinline__ df_complex<T> df_csquare(df_complex<T> z, bool fused) {
  const T cross = z.re * z.im;
  return df_complex<T>{df_multiply_add(z.re, z.re, -(z.im * z.im), fused), cross + cross};
}
// Smith's division, scaled by the divisor's larger part, as NumPy's loop; by zero, each part divided
// by +0.0 (a NaN part takes the second branch, as there)
template <typename T> __device__ __forceinline__ df_complex<T> df_cdiv(df_complex<T> x, df_complex<T> y) {
  const T real_abs = df_fabs(y.re), imaginary_abs = df_fabs(y.im);
  if (real_abs >= imaginary_abs) {
    if (real_abs == (T)0 && imaginary_abs == (T)0) return df_complex<T>{x.re / real_abs, x.im / real_abs};
    const T ratio = y.im / y.re, scale = (T)1 / (y.re + y.im * ratio);
    return df_complex<T>{(x.re + x.im * ratio) * scale, (x.im - x.re * ratio) * scale};
  }
  const T ratio = y.re / y.im, scale = (T)1 / (y.im + y.re * ratio);
  return df_complex<T>{(x.re * ratio + x.im) * scale, (x.im * ratio - x.re) * scale};
}
template <typename T> __device__ __forceinline__ df_complex<T> df_creciprocal(df_complex<T> z) {
  if (df_fabs(z.im) <= df_fabs(z.re)) {
    const T ratio = z.im / z.re, denominator = z.re + z.im * ratio;
    return df_complex<T>{(T)1 / denominator, -(ratio / denominator)};
  }
  const T ratio = z.re / z.im, denominator = z.im + z.re * ratio;
  return df_complex<T>{ratio / denominator, -((T)1 / denominator)};
}
// NumPy's SIMD absolute: the larger part times sqrt(1 + r*r), r the smaller's ratio to it; an infinite
// part gives inf, else a NaN part NaN
template <typename T> __device__ __forceinline__ T df_cabs(df_complex<T> z, bool fused) {
  T real = df_fabs(z.re), imaginary = df_fabs(z.im);
  const T inf = df_infinity(real), nan = inf - inf;
  if (isinf(imaginary)) real = inf;
  if (isinf(real)) imaginary = inf;
  const bool real_nan = df_isnan(real);
  if (df_isnan(imaginary)) real = nan;
  if (real_nan) imaginary = nan;
  const bool real_larger = real >= imaginary;
  const T larger = real_larger ? real : imaginary, smaller = real_larger ? imaginary : real;
  const T ratio = (larger == (T)0 || larger == inf) ? (T)0 : smaller / larger;
  return df_sqrt(df_multiply_add(ratio, ratio, (T)1, fused)) * larger;
}
// The complex functions NumPy's loops take from the C library (cexp, clog, csqrt, csinh, ccosh, ctanh,
// csin, ccos, ctan, casinh, casin, cacos, cacosh, catanh, catan, cpow), with C99 Annex G's special
// values as it gives them and, within a few ulp, its finite ones
DF_FLOAT_OVERLOADS_1(df_sin, sin)
DF_FLOAT_OVERLOADS_1(df_cos, cos)
DF_FLOAT_OVERLOADS_1(df_sinh, sinh)
DF_FLOAT_OVERLOADS_1(df_cosh, cosh)
DF_FLOAT_OVERLOADS_1(df_tanh, tanh)
DF_FLOAT_OVERLOADS_1(df_trunc, trunc)
DF_FLOAT_OVERLOADS_1(df_asin, asin)
DF_FLOAT_OVERLOADS_1(df_acos, acos)
DF_FLOAT_OVERLOADS_1(df_atan, atan)
DF_FLOAT_OVERLOADS_1(df_log, log)
DF_FLOAT_OVERLOADS_2(df_atan2, atan2)
template <typename T> struct df_range;
// exp_limit: (max exponent - 1) ln 2, below which exp is finite; large and small: where a magnitude
// is scaled (by 1/4, or by up = root_up^2) so that |z| neither overflows nor loses bits
template <> struct df_range<float> {
  static constexpr float exp_limit = 88.0f, huge = 3.4028234663852886e38f, normal = 1.1754943508222875e-38f;
  static constexpr float large = 0x1p125f, small = 0x1p-100f, up = 0x1p60f, root_up = 0x1p30f;
  static constexpr float ln2 = 0.693147180559945309f;
  static constexpr float tanh_one = 9.0f, epsilon = 0x1p-23f;
  static constexpr float pi = (float)3.14159265358979323846, half_pi = (float)1.57079632679489661923;
  static constexpr float quarter_pi = (float)0.785398163397448309616;
  static constexpr int up_exponent = 60;
};
template <> struct df_range<double> {
  static constexpr double exp_limit = 709.0, huge = 1.7976931348623157e308, normal = 2.2250738585072014e-308;
  static constexpr double large = 0x1p1021, small = 0x1p-1000, up = 0x1p600, root_up = 0x1p300;
  static constexpr double ln2 = 0.693147180559945309;
  static constexpr double tanh_one = 20.0, epsilon = 0x1p-52;
  static constexpr double pi = 3.14159265358979323846, half_pi = 1.57079632679489661923;
  static constexpr double quarter_pi = 0.785398163397448309616;
  static constexpr int up_exponent = 600;
};
// e^x (cosine + i sine) for a finite x: e^x taken in steps of e^exp_limit where it alone would
// overflow, so that a small cosine or sine keeps the product finite
template <typename T> __device__ __forceinline__ df_complex<T> df_exp_cis(T x, T cosine, T sine) {
  const T limit = df_range<T>::exp_limit;
  for (int step = 0; step < 2 && x > limit; ++step) {
    const T part = df_exp(limit);
    x -= limit;
    cosine *= part;
    sine *= part;
  }
  if (x > limit) return df_complex<T>{df_range<T>::huge * cosine, df_range<T>::huge * sine};
  const T magnitude = df_exp(x);
  return df_complex<T>{magnitude * cosine, magnitude * sine};
}
// sin y and cos y, a tiny y (below the normal range) as itself and 1: a zero kept with its sign
template <typename T> __device__ __forceinline__ void df_sine_cosine(T y, T &sine, T &cosine) {
  const bool tiny_angle = !(df_fabs(y) > df_range<T>::normal);
  sine = tiny_angle ? y : df_sin(y);
  cosine = tiny_angle ? (T)1 : df_cos(y);
}
// e^x (cos y + i sin y)
template <typename T> __device__ __forceinline__ df_complex<T> df_cexp(df_complex<T> z) {
  const T x = z.re, y = z.im, inf = df_infinity(x), nan = inf - inf;
  T sine, cosine;
  df_sine_cosine(y, sine, cosine);
  if (df_isfinite(x)) {
    if (!df_isfinite(y)) return df_complex<T>{nan, nan};
    return df_exp_cis(x, cosine, sine);
  }
  if (isinf(x)) {
    const T value = x < (T)0 ? (T)0 : inf;
    if (df_isfinite(y)) {
      if (y == (T)0) return df_complex<T>{value, y};
      return df_complex<T>{df_copysign(value, cosine), df_copysign(value, sine)};
    }
    if (x > (T)0) return df_complex<T>{inf, y - y};
    return df_complex<T>{(T)0, df_copysign((T)0, y)};
  }
  return df_complex<T>{nan, y == (T)0 ? y : nan};  // a NaN real part
}
// sinh(x) cos y + i cosh(x) sin y (``odd``), or cosh(x) cos y + i sinh(x) sin y, with C99 Annex G's
// special values as the C library gives them; past exp_limit both are e^|x| / 2, scaled as in cexp
template <typename T> __device__ __forceinline__ df_complex<T> df_chyperbolic(df_complex<T> z, bool odd) {
  const T x = z.re, y = z.im, inf = df_infinity(x), nan = inf - inf;
  if (y == (T)0 && !df_isnan(x)) return df_complex<T>{odd ? df_sinh(x) : df_cosh(x), odd ? y : df_copysign((T)0, x) * y};
  if (df_isnan(x) || !df_isfinite(y)) {
    if (x == (T)0) return odd ? df_complex<T>{x, nan} : df_complex<T>{nan, (T)0};
    if (isinf(x)) return df_complex<T>{inf, nan};
    return df_complex<T>{nan, y == (T)0 ? y : nan};
  }
  T sine, cosine;
  df_sine_cosine(y, sine, cosine);
  if (df_isfinite(x) && df_fabs(x) > df_range<T>::exp_limit) {
    const df_complex<T> half = df_exp_cis(df_fabs(x), cosine * (T)0.5, sine * (T)0.5);
    const T sign = x < (T)0 ? (T)-1 : (T)1;
    return odd ? df_complex<T>{sign * half.re, half.im} : df_complex<T>{half.re, sign * half.im};
  }
  const T sinh_x = df_sinh(x), cosh_x = df_cosh(x);  // +-inf and inf for an infinite x
  return odd ? df_complex<T>{sinh_x * cosine, cosh_x * sine} : df_complex<T>{cosh_x * cosine, sinh_x * sine};
}
template <typename T> __device__ __forceinline__ df_complex<T> df_csinh(df_complex<T> z) { return df_chyperbolic(z, true); }
template <typename T> __device__ __forceinline__ df_complex<T> df_ccosh(df_complex<T> z) { return df_chyperbolic(z, false); }
// (sinh x cosh x + i sin y cos y) / (sinh^2 x + cos^2 y); where tanh x rounds to +-1, the imaginary
// part is 4 sin y cos y e^(-2|x|)
template <typename T> __device__ __forceinline__ df_complex<T> df_ctanh(df_complex<T> z) {
  const T x = z.re, y = z.im, inf = df_infinity(x), nan = inf - inf;
  if (isinf(x)) {
    const T one = df_copysign((T)1, x);
    if (!df_isfinite(y) || y == (T)0) return df_complex<T>{one, df_copysign((T)0, y)};
    T sine, cosine;
    df_sine_cosine(y, sine, cosine);
    return df_complex<T>{one, df_copysign((T)0, sine * cosine)};
  }
  if (df_isnan(x)) return df_complex<T>{nan, y == (T)0 ? y : nan};
  if (!df_isfinite(y)) return df_complex<T>{x == (T)0 ? x : nan, nan};
  if (y == (T)0) return df_complex<T>{df_tanh(x), y};
  T sine, cosine;
  df_sine_cosine(y, sine, cosine);
  if (df_fabs(x) > df_range<T>::tanh_one) {
    const T scaled = (T)4 * sine * cosine;
    const T ax = df_fabs(x);
    // e^(-2|x|) in two steps: its square alone may underflow where the product need not
    const T part = df_exp(-ax);
    return df_complex<T>{df_copysign((T)1, x), scaled * part * part};
  }
  const T sinh_x = df_sinh(x), cosh_x = df_cosh(x);
  const T denominator = df_fabs(sinh_x) > df_fabs(cosine) * df_range<T>::epsilon
                            ? sinh_x * sinh_x + cosine * cosine
                            : cosine * cosine;
  return df_complex<T>{sinh_x * cosh_x / denominator, sine * cosine / denominator};
}
// The circular functions from the hyperbolic ones: sin z = -i sinh(iz), cos z = cosh(iz),
// tan z = -i tanh(iz), as C99 defines them
template <typename T> __device__ __forceinline__ df_complex<T> df_times_i(df_complex<T> z) { return df_complex<T>{-z.im, z.re}; }
template <typename T> __device__ __forceinline__ df_complex<T> df_times_minus_i(df_complex<T> z) {
  return df_complex<T>{z.im, -z.re};
}
// (the C library's sine of an infinite imaginary part and a real part that is not finite: +inf
// there, where the identity's sign follows the imaginary part)
template <typename T> __device__ __forceinline__ df_complex<T> df_csin(df_complex<T> z) {
  df_complex<T> sine = df_times_minus_i(df_csinh(df_times_i(z)));
  if (!df_isfinite(z.re) && isinf(z.im)) sine.im = df_fabs(sine.im);
  return sine;
}
template <typename T> __device__ __forceinline__ df_complex<T> df_ccos(df_complex<T> z) { return df_ccosh(df_times_i(z)); }
template <typename T> __device__ __forceinline__ df_complex<T> df_ctan(df_complex<T> z) { return df_times_minus_i(df_ctanh(df_times_i(z))); }
// log|z| + i arg z: near |z| = 1 as log1p of |z|^2 - 1, its squares exact by fma; far out scaled
template <typename T> __device__ __forceinline__ df_complex<T> df_clog(df_complex<T> z) {
  const T x = z.re, y = z.im, inf = df_infinity(x), nan = inf - inf;
  if (df_isnan(x) || df_isnan(y)) return df_complex<T>{(isinf(x) || isinf(y)) ? inf : nan, nan};
  const T angle = df_atan2(y, x);
  if (isinf(x) || isinf(y)) return df_complex<T>{inf, angle};
  const T ax = df_fabs(x), ay = df_fabs(y);
  const T larger = ax > ay ? ax : ay, smaller = ax > ay ? ay : ax;
  if (larger == (T)0) return df_complex<T>{-(T)1 / larger, angle};  // -inf, dividing by zero
  if (larger > df_range<T>::large)
    return df_complex<T>{df_log(df_hypot(ax * (T)0.25, ay * (T)0.25)) + (T)2 * df_range<T>::ln2, angle};
  if (larger < df_range<T>::small) {
    const T up = df_range<T>::up;
    const T shift = (T)df_range<T>::up_exponent * df_range<T>::ln2;
    return df_complex<T>{df_log(df_hypot(ax * up, ay * up)) - shift, angle};
  }
  if (larger >= (T)0.5 && larger <= (T)1.5 && smaller < (T)1) {
    const T large2 = larger * larger, small2 = smaller * smaller;
    const T large_error = df_fma(larger, larger, -large2), small_error = df_fma(smaller, smaller, -small2);
    const T excess = ((large2 - (T)1) + small2) + (large_error + small_error);
    return df_complex<T>{(T)0.5 * df_log1p(excess), angle};
  }
  return df_complex<T>{df_log(df_hypot(ax, ay)), angle};
}
// The principal root: t = sqrt((|x| + |z|) / 2), the other part |y| / 2t, scaled where |z| would
// overflow or lose bits below the normal range
template <typename T> __device__ __forceinline__ df_complex<T> df_csqrt(df_complex<T> z) {
  const T x = z.re, y = z.im, inf = df_infinity(x), nan = inf - inf;
  if (isinf(y)) return df_complex<T>{inf, y};
  if (isinf(x)) {
    if (df_isnan(y)) return x > (T)0 ? df_complex<T>{x, y} : df_complex<T>{y, df_copysign(inf, y)};
    return x > (T)0 ? df_complex<T>{x, df_copysign((T)0, y)} : df_complex<T>{(T)0, df_copysign(inf, y)};
  }
  if (df_isnan(x) || df_isnan(y)) return df_complex<T>{nan, nan};
  if (y == (T)0) {
    if (x == (T)0) return df_complex<T>{(T)0, y};
    return x > (T)0 ? df_complex<T>{df_sqrt(x), y} : df_complex<T>{(T)0, df_copysign(df_sqrt(-x), y)};
  }
  T ax = df_fabs(x), ay = df_fabs(y), scale = (T)1;
  if (ax > df_range<T>::large || ay > df_range<T>::large) {
    ax *= (T)0.25, ay *= (T)0.25, scale = (T)2;
  } else if (ax < df_range<T>::small && ay < df_range<T>::small) {
    ax *= df_range<T>::up, ay *= df_range<T>::up, scale = (T)1 / df_range<T>::root_up;
  }
  const T root = df_sqrt((ax + df_hypot(ax, ay)) * (T)0.5);
  const T other = ay / (root + root);
  if (x >= (T)0) return df_complex<T>{root * scale, df_copysign(other * scale, y)};
  return df_complex<T>{other * scale, df_copysign(root * scale, y)};
}
// x^2 + y^2 - 1 for 0 <= y <= x < 1 where it cancels: the squares exact by fma, summed with their
// errors carried
template <typename T> __device__ __forceinline__ T df_x2y2m1(T x, T y) {
  const T x2 = x * x, y2 = y * y, x2_error = df_fma(x, x, -x2), y2_error = df_fma(y, y, -y2);
  const T first = x2 - (T)1, first_error = (x2 - (first + (T)1)) + ((T)-1 - (first - x2));
  const T sum = first + y2, virtual_y2 = sum - first, sum_error = (first - (sum - virtual_y2)) + (y2 - virtual_y2);
  return sum + (((first_error + sum_error) + x2_error) + y2_error);
}
// atanh z = log((1 + z) / (1 - z)) / 2: the real part a quarter of log1p(4x / |1 - z|^2) (of the
// log of the ratio where it is below 1/2), near |x| = 1 with a tiny y from log|y|; the imaginary
// part half of atan2(2y, 1 - x^2 - y^2), that difference computed without cancellation; far out,
// 1/z's real part and +-pi/2
template <typename T> __device__ __forceinline__ df_complex<T> df_catanh(df_complex<T> z) {
  const T x = z.re, y = z.im, inf = df_infinity(x), nan = inf - inf, eps = df_range<T>::epsilon;
  const T half_pi = df_range<T>::half_pi;
  if (isinf(x) || isinf(y)) return df_complex<T>{df_copysign((T)0, x), df_isnan(y) ? nan : df_copysign(half_pi, y)};
  if (df_isnan(x) || df_isnan(y)) return df_complex<T>{x == (T)0 ? x : nan, nan};
  if (x == (T)0 && y == (T)0) return z;
  const T ax = df_fabs(x), ay = df_fabs(y);
  if (ax >= (T)16 / eps || ay >= (T)16 / eps) {
    const T h = df_hypot(x * (T)0.5, y * (T)0.5);
    return df_complex<T>{x / h / h * (T)0.25, df_copysign(half_pi, y)};
  }
  T real;
  if (ax == (T)1 && ay < eps * eps) {
    real = df_copysign((T)0.5, x) * (df_range<T>::ln2 - df_log(ay));
  } else {
    const T y2 = ay < eps * eps ? (T)0 : ay * ay;
    const T above = (T)1 + x, below = (T)1 - x;
    const T numerator = y2 + above * above, denominator = y2 + below * below;
    const T ratio = numerator / denominator;
    real = ratio < (T)0.5 ? (T)0.25 * df_log(ratio) : (T)0.25 * df_log1p((T)4 * x / denominator);
  }
  const T larger = ax < ay ? ay : ax, smaller = ax < ay ? ax : ay;
  T difference;  // 1 - x^2 - y^2
  if (smaller < eps * (T)0.5) {
    difference = ((T)1 - larger) * ((T)1 + larger);
  } else if (larger >= (T)1 || (larger < (T)0.75 && smaller < (T)0.5)) {
    difference = ((T)1 - larger) * ((T)1 + larger) - smaller * smaller;
  } else {
    difference = -df_x2y2m1(larger, smaller);
  }
  return df_complex<T>{real, (T)0.5 * df_atan2((T)2 * y, difference)};
}
// atan z = -i atanh(iz)
template <typename T> __device__ __forceinline__ df_complex<T> df_catan(df_complex<T> z) {
  return df_times_minus_i(df_catanh(df_times_i(z)));
}
// arcsin z's real part, arccos z's and their imaginary part's magnitude, for finite x, y >= 0 (Hull,
// Fairgrieve and Tang's method): with r = |z + 1|, s = |z - 1|, A = (r + s) / 2 >= 1, the real parts
// are asin and acos of x / A, each written as an atan where x / A nears 1, and the imaginary part
// log(A + sqrt(A^2 - 1)), as log1p of A - 1 computed without cancellation where A is near 1; a y too
// small to show in A - 1 by its first order, and far out log 2|z| and the angles
template <typename T> struct df_arcsine_parts {
  T asin_real, acos_real, imaginary;
};
template <typename T> __device__ __forceinline__ df_arcsine_parts<T> df_arcsine(T x, T y) {
  const T eps = df_range<T>::epsilon, half_pi = df_range<T>::half_pi;
  if (x > (T)1 / eps || y > (T)1 / eps) {
    const T imaginary = df_log(df_hypot(x * (T)0.5, y * (T)0.5)) + (T)2 * df_range<T>::ln2;
    return df_arcsine_parts<T>{df_atan2(x, y), df_atan2(y, x), imaginary};
  }
  if (y < eps * df_fabs(x - (T)1)) {
    if (x < (T)1) {
      const T root = df_sqrt(((T)1 - x) * ((T)1 + x));
      return df_arcsine_parts<T>{df_asin(x), df_acos(x), y / root};
    }
    const T root = df_sqrt((x - (T)1) * (x + (T)1));
    return df_arcsine_parts<T>{half_pi, y / root, df_log1p((x - (T)1) + root)};
  }
  const T r = df_hypot(x + (T)1, y), s = df_hypot(x - (T)1, y), a = (T)0.5 * (r + s), b = x / a;
  const T y2 = y * y;
  T asin_real, acos_real;
  if (b <= (T)0.6417) {
    asin_real = df_asin(b), acos_real = df_acos(b);
  } else {
    const T half_apx = (T)0.5 * (a + x);
    const T across = x <= (T)1 ? df_sqrt(half_apx * (y2 / (r + x + (T)1) + (s + ((T)1 - x))))
                               : y * df_sqrt(half_apx / (r + x + (T)1) + half_apx / (s + (x - (T)1)));
    asin_real = df_atan(x / across), acos_real = df_atan(across / x);
  }
  T imaginary;
  if (a <= (T)1.5) {
    // 2(A - 1), halved after the product under the root: halving a subnormal first would round it
    const T twice = x < (T)1 ? y2 / (r + x + (T)1) + y2 / (s + ((T)1 - x)) : y2 / (r + x + (T)1) + (s + (x - (T)1));
    imaginary = df_log1p((T)0.5 * twice + df_sqrt(twice * (a + (T)1) * (T)0.5));
  } else {
    imaginary = df_log(a + df_sqrt(a * a - (T)1));
  }
  return df_arcsine_parts<T>{asin_real, acos_real, imaginary};
}
// asinh z = -i asin(iz): C99 Annex G's special values as the C library gives them
template <typename T> __device__ __forceinline__ df_complex<T> df_carcsinh(df_complex<T> z) {
  const T x = z.re, y = z.im, inf = df_infinity(x), nan = inf - inf;
  const T quarter_pi = df_range<T>::quarter_pi, half_pi = df_range<T>::half_pi;
  if (isinf(x)) return df_complex<T>{x, df_isnan(y) ? y : df_copysign(isinf(y) ? quarter_pi : (T)0, y)};
  if (isinf(y)) return df_complex<T>{df_isnan(x) ? inf : df_copysign(inf, x), df_isnan(x) ? nan : df_copysign(half_pi, y)};
  if (df_isnan(x)) return df_complex<T>{nan, y == (T)0 ? y : nan};
  if (df_isnan(y)) return df_complex<T>{nan, nan};
  if (x == (T)0 && y == (T)0) return z;
  const df_arcsine_parts<T> parts = df_arcsine(df_fabs(y), df_fabs(x));
  return df_complex<T>{df_copysign(parts.imaginary, x), df_copysign(parts.asin_real, y)};
}
// asin z = -i asinh(iz), but where a part is NaN: the C library's own cases
template <typename T> __device__ __forceinline__ df_complex<T> df_carcsin(df_complex<T> z) {
  const T x = z.re, y = z.im, inf = df_infinity(x), nan = inf - inf;
  if (df_isnan(x) || df_isnan(y)) {
    if (x == (T)0) return z;
    if (isinf(x) || isinf(y)) return df_complex<T>{nan, df_copysign(inf, y)};
    return df_complex<T>{nan, nan};
  }
  return df_times_minus_i(df_carcsinh(df_times_i(z)));
}
// acos z: pi/2 - asin z where a part is not finite or both are zero, as the C library; else from
// df_arcsine, pi less it for a negative x
template <typename T> __device__ __forceinline__ df_complex<T> df_carccos(df_complex<T> z) {
  const T x = z.re, y = z.im, half_pi = df_range<T>::half_pi, pi = df_range<T>::pi;
  if (!df_isfinite(x) || !df_isfinite(y) || (x == (T)0 && y == (T)0)) {
    const df_complex<T> sine = df_carcsin(z);
    return df_complex<T>{half_pi - sine.re, -sine.im};
  }
  const df_arcsine_parts<T> parts = df_arcsine(df_fabs(x), df_fabs(y));
  return df_complex<T>{x < (T)0 ? pi - parts.acos_real : parts.acos_real, -df_copysign(parts.imaginary, y)};
}
// acosh z = +-i acos z, its real part not negative: the C library's special values
template <typename T> __device__ __forceinline__ df_complex<T> df_carccosh(df_complex<T> z) {
  const T x = z.re, y = z.im, inf = df_infinity(x), nan = inf - inf;
  const T quarter_pi = df_range<T>::quarter_pi, half_pi = df_range<T>::half_pi, pi = df_range<T>::pi;
  if (isinf(y)) {
    const T angle = isinf(x) ? (x < (T)0 ? (T)3 * quarter_pi : quarter_pi) : half_pi;
    return df_complex<T>{inf, df_isnan(x) ? nan : df_copysign(angle, y)};
  }
  if (isinf(x)) return df_complex<T>{inf, df_isnan(y) ? nan : df_copysign(x < (T)0 ? pi : (T)0, y)};
  if (df_isnan(x) || df_isnan(y)) return df_complex<T>{nan, x == (T)0 ? half_pi : nan};
  const df_arcsine_parts<T> parts = df_arcsine(df_fabs(x), df_fabs(y));
  return df_complex<T>{parts.imaginary, df_copysign(x < (T)0 ? pi - parts.acos_real : parts.acos_real, y)};
}
// Each part times a real constant rounded to the parts' precision: NumPy's log2 and log10 (of the
// natural logarithm) and exp2 (of the exponent times ln 2)
template <typename T> __device__ __forceinline__ df_complex<T> df_cscale(df_complex<T> z, double factor) {
  const T scale = (T)factor;
  return df_complex<T>{z.re * scale, z.im * scale};
}
// C's product (C99 Annex G): where both parts come out NaN from an infinite operand or product, the
// infinities are recovered
template <typename T> __device__ __forceinline__ df_complex<T> df_cproduct_c99(df_complex<T> x, df_complex<T> y) {
  T a = x.re, b = x.im, c = y.re, d = y.im;
  const T ac = a * c, bd = b * d, ad = a * d, bc = b * c;
  df_complex<T> product{ac - bd, ad + bc};
  if (!df_isnan(product.re) || !df_isnan(product.im)) return product;
  bool recompute = false;
  const auto unit = [](T v) { return df_copysign(isinf(v) ? (T)1 : (T)0, v); };
  const auto zero_if_nan = [](T v) { return df_isnan(v) ? df_copysign((T)0, v) : v; };
  if (isinf(a) || isinf(b)) {
    a = unit(a), b = unit(b), c = zero_if_nan(c), d = zero_if_nan(d);
    recompute = true;
  }
  if (isinf(c) || isinf(d)) {
    c = unit(c), d = unit(d), a = zero_if_nan(a), b = zero_if_nan(b);
    recompute = true;
  }
  if (!recompute && (isinf(ac) || isinf(bd) || isinf(ad) || isinf(bc))) {
    a = zero_if_nan(a), b = zero_if_nan(b), c = zero_if_nan(c), d = zero_if_nan(d);
    recompute = true;
  }
  if (!recompute) return product;
  const T inf = df_infinity(a);
  return df_complex<T>{inf * (a * c - b * d), inf * (a * d + b * c)};
}
// NumPy's complex power: 1 for a zero exponent; for a zero base 0 where the exponent's real part is
// positive, else NaN; an integral exponent below 100 in magnitude by C's products, each rounded (1,
// 2 and 3 unrolled, others by binary powers from 1, a negative one divided into 1); the C library's
// cpow otherwise, e^(b log a)
template <typename T> __device__ __forceinline__ df_complex<T> df_cpow(df_complex<T> a, df_complex<T> b) {
  const T inf = df_infinity(b.re), nan = inf - inf;
  const df_complex<T> unit{(T)1, (T)0};
  if (b.re == (T)0 && b.im == (T)0) return unit;
  if (a.re == (T)0 && a.im == (T)0) return b.re > (T)0 ? df_complex<T>{(T)0, (T)0} : df_complex<T>{nan, nan};
  if (b.im == (T)0 && b.re == df_trunc(b.re) && b.re > (T)-100 && b.re < (T)100) {
    const int exponent = (int)b.re, count = exponent < 0 ? -exponent : exponent;
    if (exponent == 1) return a;
    if (exponent == 2) return df_cmul(a, a, false);
    if (exponent == 3) return df_cmul(a, df_cmul(a, a, false), false);
    df_complex<T> power = unit, base = a;
    for (int mask = 1;; mask <<= 1) {
      if (count & mask) power = df_cmul(power, base, false);
      if (count < (mask << 1)) break;
      base = df_cmul(base, base, false);
    }
    return exponent < 0 ? df_cdiv(unit, power) : power;
  }
  return df_cexp(df_cproduct_c99(b, df_clog(a)));
}
// What a complex op may have raised, judged from its value and operands (see df_raised): NaN from
// numbers, an infinity from finite numbers; an underflow wherever an inexact op read finite numbers,
// as its products and ratios may underflow with no trace in the value
template <typename T>
__device__ __forceinline__ unsigned df_complex_raised(df_complex<T> value, bool nan_read, bool finite_read,
                                                      bool may_underflow) {
  unsigned raised = 0;
  if (df_isnan(value) && !nan_read) raised |= DF_INVALID;
  if (df_isinf(value) && finite_read) raised |= DF_DIVIDE | DF_OVERFLOW;
  if (may_underflow && finite_read) raised |= DF_UNDERFLOW;
  return raised;
}

// ---- argmax/argmin: the first extreme wins, and the first NaN wins and stays
template <typename T> __device__ __forceinline__ bool df_arg_takes(T best, df_i64 best_index, T value, df_i64 index,
                                                                   bool is_max) {
  if (index < 0) return false;
  if (best_index < 0) return true;
  bool best_nan = df_isnan(best), value_nan = df_isnan(value);
  if (best_nan || value_nan) return value_nan && (!best_nan || index < best_index);
  if (is_max ? value > best : value < best) return true;
  return value == best && index < best_index;
}
template <> __device__ __forceinline__ bool df_arg_takes<bool>(bool best, df_i64 best_index, bool value, df_i64 index,
                                                               bool is_max) {
  if (index < 0) return false;
  if (best_index < 0) return true;
  if (is_max ? (value && !best) : (!value && best)) return true;
  return value == best && index < best_index;
}
#define DF_INTEGER_ARG_TAKES(T)                                                                       \
  template <> __device__ __forceinline__ bool df_arg_takes<T>(T best, df_i64 best_index, T value,      \
                                                              df_i64 index, bool is_max) {              \
    if (index < 0) return false;                                                                      \
    if (best_index < 0) return true;                                                                  \
    if (is_max ? value > best : value < best) return true;                                            \
    return value == best && index < best_index;                                                       \
  }
DF_INTEGER_ARG_TAKES(df_i8)
DF_INTEGER_ARG_TAKES(df_u8)
DF_INTEGER_ARG_TAKES(df_i16)
DF_INTEGER_ARG_TAKES(df_u16)
DF_INTEGER_ARG_TAKES(df_i32)
DF_INTEGER_ARG_TAKES(df_u32)
DF_INTEGER_ARG_TAKES(df_i64)
DF_INTEGER_ARG_TAKES(df_u64)

// ---- warp shuffles of any register type
template <typename T> __device__ __forceinline__ T df_shuffle_down(T value, int offset) {
  return __shfl_down_sync(0xffffffffu, value, offset);
}
template <> __device__ __forceinline__ bool df_shuffle_down<bool>(bool value, int offset) {
  return __shfl_down_sync(0xffffffffu, (int)value, offset) != 0;
}
template <> __device__ __forceinline__ df_i8 df_shuffle_down<df_i8>(df_i8 value, int offset) {
  return (df_i8)__shfl_down_sync(0xffffffffu, (int)value, offset);
}
template <> __device__ __forceinline__ df_u8 df_shuffle_down<df_u8>(df_u8 value, int offset) {
  return (df_u8)__shfl_down_sync(0xffffffffu, (unsigned)value, offset);
}
template <> __device__ __forceinline__ df_i16 df_shuffle_down<df_i16>(df_i16 value, int offset) {
  return (df_i16)__shfl_down_sync(0xffffffffu, (int)value, offset);
}
template <> __device__ __forceinline__ df_u16 df_shuffle_down<df_u16>(df_u16 value, int offset) {
  return (df_u16)__shfl_down_sync(0xffffffffu, (unsigned)value, offset);
}
template <typename T> __device__ __forceinline__ df_complex<T> df_shuffle_down(df_complex<T> value, int offset) {
  return df_complex<T>{df_shuffle_down(value.re, offset), df_shuffle_down(value.im, offset)};
}
// The value of the thread at ``source`` of the warp
template <typename T> __device__ __forceinline__ T df_shuffle_from(T value, int source) {
  return __shfl_sync(0xffffffffu, value, source, 32);
}
#define DF_SMALL_SHUFFLE_FROM(T)                                                             \
  template <> __device__ __forceinline__ T df_shuffle_from<T>(T value, int source) {         \
    return (T)__shfl_sync(0xffffffffu, (int)value, source, 32);                              \
  }
DF_SMALL_SHUFFLE_FROM(bool)
DF_SMALL_SHUFFLE_FROM(df_i8)
DF_SMALL_SHUFFLE_FROM(df_u8)
DF_SMALL_SHUFFLE_FROM(df_i16)
DF_SMALL_SHUFFLE_FROM(df_u16)
template <typename T> __device__ __forceinline__ df_complex<T> df_shuffle_from(df_complex<T> value, int source) {
  return df_complex<T>{df_shuffle_from(value.re, source), df_shuffle_from(value.im, source)};
}
