#include "core/train/tanh.h"

#include <cstring>

namespace tpuemu {
namespace {

// GCC's generic vectors of N lanes: one source, compiled below for AVX-512
// (16 lanes), AVX2 (8) and the x86-64 baseline (4). Every branch of the
// scalar code is computed for every lane and the lane's own branch chosen,
// so each lane sees the scalar code's operations exactly. This file is built
// without contraction into fused multiply-adds (CMakeLists.txt), which would
// round differently. The scalar code's tests on bits are made on |x| as
// floats (the same tests), and each choice is one comparison: GCC 12
// expands a choice on a combination of comparisons lane by lane on AVX-512
// (build with -Wvector-operation-performance to see), which made that
// build slower than AVX2's.
//
// The vector types of N lanes, and their conversions: spelled out for each
// N, because GCC drops a vector attribute from a dependent `using` and
// refuses __builtin_convertvector on a dependent type.
template <int N>
struct Vectors;
#define TPUEMU_VECTORS(n)                                                                               \
  template <>                                                                                           \
  struct Vectors<n> {                                                                                   \
    typedef float Floats __attribute__((vector_size(n * sizeof(float))));                               \
    typedef int32_t Ints __attribute__((vector_size(n * sizeof(int32_t))));                             \
    typedef uint32_t Bits __attribute__((vector_size(n * sizeof(uint32_t))));                           \
    [[gnu::always_inline]] static Ints Truncate(Floats v) { return __builtin_convertvector(v, Ints); }  \
    [[gnu::always_inline]] static Floats ToFloats(Ints v) { return __builtin_convertvector(v, Floats); } \
  };
TPUEMU_VECTORS(4)
TPUEMU_VECTORS(8)
TPUEMU_VECTORS(16)
#undef TPUEMU_VECTORS

template <int N>
struct Lanes {
  using Floats = typename Vectors<N>::Floats;
  using Ints = typename Vectors<N>::Ints;
  using Bits = typename Vectors<N>::Bits;
  // Everything inlines into the kernel compiled for the target below.
  [[gnu::always_inline]] static Floats Splat(float v) { return Floats{} + v; }
  [[gnu::always_inline]] static Ints Splat(int32_t v) { return Ints{} + v; }
  [[gnu::always_inline]] static Bits BitsOf(Floats v) { return reinterpret_cast<Bits>(v); }
  [[gnu::always_inline]] static Floats FloatsOf(Bits v) { return reinterpret_cast<Floats>(v); }
  [[gnu::always_inline]] static Floats Abs(Floats v) { return FloatsOf(BitsOf(v) & 0x7fffffffu); }
  // v * 2^k for a normal v and result, by adding k to the exponent field.
  [[gnu::always_inline]] static Floats ScaleByPowerOfTwo(Floats v, Ints k) {
    return FloatsOf(BitsOf(v) + (reinterpret_cast<Bits>(k) << 23));
  }

  // expm1f's constants: ln 2 split so that k ln2_hi is exact, 1 / ln 2, and
  // the scaled coefficients of its rational approximation on [-ln2/2, ln2/2].
  static constexpr float kLn2Hi = 6.9313812256e-01f, kLn2Lo = 9.0580006145e-06f, kInvLn2 = 1.4426950216e+00f;
  static constexpr float kQ1 = -3.3333335072e-02f, kQ2 = 1.5873016091e-03f, kQ3 = -7.9365076090e-05f,
                         kQ4 = 4.0082177293e-06f, kQ5 = -2.0109921195e-07f;

  // e^y - 1 for the arguments tanh gives it: y in (-2, 0), where y = k ln 2
  // + x has k in -3..0, or y in [2, 44), where k is 3..63. Nothing overflows
  // there, and expm1f's early exits (y < -27 ln 2, y > 88.7) and its k = 1
  // branch never apply.
  [[gnu::always_inline]] static Floats Expm1(Floats y) {
    const Floats ay = Abs(y);
    // |x| <= ln2 / 2: k = 0 up to ln2 / 2, -1 down to -1.5 ln 2, else y / ln 2
    // rounded half away from zero (a truncating conversion, as C's).
    // k ln2_hi is exact; c is what x = hi - lo lost.
    Ints k = Vectors<N>::Truncate(kInvLn2 * y + (y < 0 ? Splat(-0.5f) : Splat(0.5f)));
    k = ay < 0x1.0a2b24p+0f ? Splat(-1) : k;  // 1.5 ln 2
    k = ay <= 0x1.62e43p-2f ? Splat(0) : k;   // ln 2 / 2
    const Floats t = Vectors<N>::ToFloats(k);
    const Floats hi = y - t * kLn2Hi;  // y itself where k = 0
    const Floats lo = t * kLn2Lo;
    const Floats x = hi - lo;
    const Floats c = (hi - x) - lo;

    const Floats hfx = 0.5f * x;
    const Floats hxs = x * hfx;
    const Floats r1 = 1.0f + hxs * (kQ1 + hxs * (kQ2 + hxs * (kQ3 + hxs * (kQ4 + hxs * kQ5))));
    const Floats t3 = 3.0f - r1 * hfx;
    Floats e = hxs * ((r1 - t3) / (6.0f - x * t3));
    const Floats when_k0 = x - (x * e - hxs);
    e = x * (e - c) - c;
    e -= hxs;
    const Floats when_k_minus_1 = 0.5f * (x - e) - 0.5f;
    // 2^k (1 + x - e) - 1, keeping the low bits in the three ways expm1f
    // does. 1 - 2^-k is exact for k < 23.
    const Floats when_k_far = ScaleByPowerOfTwo(1.0f - (e - x), k) - 1.0f;
    const Floats two_to_minus_k = FloatsOf(reinterpret_cast<Bits>(0x7f - k) << 23);
    const Floats when_k_below_23 = ScaleByPowerOfTwo((1.0f - two_to_minus_k) - (e - x), k);
    const Floats when_k_to_56 = ScaleByPowerOfTwo((x - (e + two_to_minus_k)) + 1.0f, k);

    Floats r = k > 56 ? when_k_far : when_k_to_56;
    r = k < 23 ? when_k_below_23 : r;
    r = k == 0 ? when_k0 : r;
    r = k == -1 ? when_k_minus_1 : r;
    r = k < -1 ? when_k_far : r;
    return ay < 0x1p-25f ? y : r;  // y itself
  }

  [[gnu::always_inline]] static Floats Tanh(Floats v) {
    // tanh x = 1 - 2 / (e^2|x| + 1) from |x| = 1 up, -m / (m + 2) with
    // m = e^-2|x| - 1 below; 1 from 22 up; x below 2^-55. Lanes outside
    // [2^-55, 22) take a harmless 1 or 0.5 through expm1. (Two different
    // values: GCC would merge two choices of one value into one choice on
    // two comparisons, which it expands lane by lane on AVX-512.)
    const Floats a = Abs(v);
    Floats ax = a < 22.0f ? a : Splat(1.0f);
    ax = a >= 0x1p-55f ? ax : Splat(0.5f);
    const Floats t = Expm1(a >= 1.0f ? 2.0f * ax : -2.0f * ax);
    const Floats q = (a >= 1.0f ? Splat(2.0f) : -t) / (t + 2.0f);
    Floats z = a >= 1.0f ? 1.0f - q : q;
    z = a >= 22.0f ? Splat(1.0f) : z;
    z = v >= 0.0f ? z : -z;
    z = a < 0x1p-55f ? v * (1.0f + v) : z;  // +-0 and tiny: x
    // +-1 at +-inf; a NaN comes back quiet, as 1 / x +- 1 gives it.
    z = v == __builtin_inff() ? Splat(1.0f) : z;
    z = v == -__builtin_inff() ? Splat(-1.0f) : z;
    return v == v ? z : v + 1.0f;
  }

  [[gnu::always_inline]] static void Apply(const float* in, int64_t n, float* out) {
    int64_t i = 0;
    for (; i + N <= n; i += N) {
      Floats v;
      std::memcpy(&v, in + i, sizeof v);
      const Floats r = Tanh(v);
      std::memcpy(out + i, &r, sizeof r);
    }
    if (i == n) return;
    Floats v{};
    const size_t tail = static_cast<size_t>(n - i) * sizeof(float);
    std::memcpy(&v, in + i, tail);
    const Floats r = Tanh(v);
    std::memcpy(out + i, &r, tail);
  }
};

__attribute__((target("avx512f"))) void TanhAvx512(const float* in, int64_t n, float* out) {
  Lanes<16>::Apply(in, n, out);
}
__attribute__((target("avx2"))) void TanhAvx2(const float* in, int64_t n, float* out) { Lanes<8>::Apply(in, n, out); }
void TanhBaseline(const float* in, int64_t n, float* out) { Lanes<4>::Apply(in, n, out); }

}  // namespace

std::vector<TanhBuild> TanhBuildsThisCpuRuns() {
  __builtin_cpu_init();
  std::vector<TanhBuild> builds;  // fastest first
  if (__builtin_cpu_supports("avx512f")) builds.push_back({"avx512", TanhAvx512});
  if (__builtin_cpu_supports("avx2")) builds.push_back({"avx2", TanhAvx2});
  builds.push_back({"baseline", TanhBaseline});
  return builds;
}

void TanhArray(const float* in, int64_t n, float* out) {
  static const TanhBuild::Kernel kernel = TanhBuildsThisCpuRuns().front().kernel;
  kernel(in, n, out);
}

}  // namespace tpuemu
