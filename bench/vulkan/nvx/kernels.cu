// CUDA kernels for nvx_probe (see README.md): launched from Vulkan command buffers through
// VK_NVX_binary_import on Vulkan buffers (by device address). Every GEMM computes
// y[M, N] = x[M, K] W[N, K]^T with f16 x and W, f32 sums and f32 y; the host requires K % 8 == 0
// and 16-byte-aligned rows. Shared tiles use the no-swizzle core-matrix layout (8 rows x 16 bytes,
// the K blocks of an 8-row group side by side) that wgmma's descriptors read.
#include <cuda_fp16.h>
#include <stdint.h>

#include "wgmma.h"

namespace {

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool ok) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(ok ? 16 : 0));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// cp.async writes through the generic proxy, wgmma reads through the async one.
__device__ __forceinline__ void fence_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void bar_init(uint32_t a, int n) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(a), "r"(n));
}
__device__ __forceinline__ void bar_arrive(uint32_t a) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(a) : "memory");
}
// Arrives once this thread's earlier cp.async copies have landed.
__device__ __forceinline__ void bar_arrive_on_copies(uint32_t a) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(a) : "memory");
}
__device__ __forceinline__ void bar_wait(uint32_t a, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred p;\nWAIT: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n@!p bra WAIT;\n}\n" ::"r"(a),
      "r"(parity)
      : "memory");
}
// Shared-memory matrix descriptor, no swizzle: start, then the byte distances between core
// matrices along K (leading) and along M or N (stride), each in 16-byte units.
__device__ __forceinline__ uint64_t desc(uint32_t addr, uint32_t lead, uint32_t stride) {
  return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)(lead >> 4) << 16) | ((uint64_t)(stride >> 4) << 32);
}
// Offset of 16-byte chunk c of row r in a tile with `cpr` chunks a row, core-matrix layout.
__device__ __forceinline__ uint32_t core_at(int r, int c, int cpr) {
  return (uint32_t)(((r >> 3) * cpr + c) * 128 + (r & 7) * 16);
}
// Chunk c of row r, XOR-swizzled over a row-major tile so ldmatrix's eight rows hit distinct banks.
__device__ __forceinline__ uint32_t swz_at(int r, int c, int cpr) {
  const int s = cpr == 8 ? (r & 7) : cpr == 4 ? ((r >> 1) & 3) : 0;
  return (uint32_t)(r * cpr + (c ^ s)) * 16u;
}

// Rows [r0, r0 + ROWS) x K chunks [k0, k0 + 8 * CPR) of a row-major [rows, K] matrix into shared.
template <int ROWS, int CPR, int THREADS, bool CORE>
__device__ __forceinline__ void copy_tile(uint32_t dst, const __half* src, int r0, int rows, int ld, int k0, int K,
                                          int tid) {
#pragma unroll
  for (int i = tid; i < ROWS * CPR; i += THREADS) {
    const int r = i / CPR, c = i % CPR, gr = r0 + r, gk = k0 + c * 8;
    const bool ok = gr < rows && gk < K;
    cp_async16(dst + (CORE ? core_at(r, c, CPR) : swz_at(r, c, CPR)),
               ok ? (const void*)(src + (size_t)gr * ld + gk) : (const void*)src, ok);
  }
}

// Register (i, j, e) of the m16n8 accumulator layout at rows m, columns n of y.
__device__ __forceinline__ void store2(float* y, int M, int N, int ldy, int m, int n, float v0, float v1) {
  if (m >= M) return;
  float* p = y + (size_t)m * ldy + n;
  if (n + 1 < N) *(float2*)p = make_float2(v0, v1);
  else if (n < N) p[0] = v0;
}

// wgmma's m64nN accumulator: warp q of the warpgroup holds rows 16q + lane/4 (+ 8); registers
// 4j + {0, 1} are columns 8j + 2 (lane % 4) + {0, 1}, 4j + {2, 3} the same 8 rows down.
template <int BN>
__device__ __forceinline__ void store_wgmma(float* y, const float* acc, int M, int N, int ldy, int row0, int n0) {
  const int lane = threadIdx.x & 31, q = (threadIdx.x >> 5) & 3;
  const int r = row0 + q * 16 + (lane >> 2);
#pragma unroll
  for (int j = 0; j < BN / 8; j++)
#pragma unroll
    for (int h = 0; h < 2; h++)
      store2(y, M, N, ldy, r + h * 8, n0 + j * 8 + (lane & 3) * 2, acc[j * 4 + h * 2], acc[j * 4 + h * 2 + 1]);
}

template <int BN>
__device__ __forceinline__ void wgmma_ss(float* d, uint64_t da, uint64_t db) {
  if constexpr (BN == 128) wgmma_ss_n128(d, da, db);
  else wgmma_ss_n256(d, da, db);
}
template <int BN>
__device__ __forceinline__ void wgmma_rs(float* d, const uint32_t* a, uint64_t db) {
  if constexpr (BN == 128) wgmma_rs_n128(d, a, db);
  else wgmma_rs_n256(d, a, db);
}

// 1. Ampere-style: mma.sync m16n8k16 on ldmatrix fragments, cp.async into STAGES shared stages.
template <int BM, int BN, int BK, int WM, int WN, int STAGES>
__device__ void gemm_mma(float* y, const __half* x, const __half* w, int M, int N, int K, int lda, int ldw, int ldy) {
  constexpr int THREADS = WM * WN * 32, CPR = BK / 8, TM = BM / WM, TN = BN / WN, FM = TM / 16, FN = TN / 8;
  constexpr uint32_t A_BYTES = BM * BK * 2, STAGE = (BM + BN) * BK * 2;
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t base = (uint32_t)__cvta_generic_to_shared(smem);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wm = warp / WN, wn = warp % WN;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN, KT = (K + BK - 1) / BK;
  auto load = [&](int s, int kt) {
    copy_tile<BM, CPR, THREADS, false>(base + s * STAGE, x, m0, M, lda, kt * BK, K, tid);
    copy_tile<BN, CPR, THREADS, false>(base + s * STAGE + A_BYTES, w, n0, N, ldw, kt * BK, K, tid);
  };
  float acc[FM][FN][4] = {};
#pragma unroll
  for (int s = 0; s < STAGES - 1; s++) {
    if (s < KT) load(s, s);
    cp_commit();
  }
  for (int kt = 0; kt < KT; kt++) {
    cp_wait<STAGES - 2>();
    __syncthreads();
    if (kt + STAGES - 1 < KT) load((kt + STAGES - 1) % STAGES, kt + STAGES - 1);
    cp_commit();
    const uint32_t sa = base + (kt % STAGES) * STAGE, sb = sa + A_BYTES;
#pragma unroll
    for (int kk = 0; kk < BK / 16; kk++) {
      uint32_t af[FM][4], bf[FN][2];
#pragma unroll
      for (int i = 0; i < FM; i++) {
        const uint32_t at = sa + swz_at(wm * TM + i * 16 + (lane & 15), kk * 2 + (lane >> 4), CPR);
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(af[i][0]), "=r"(af[i][1]), "=r"(af[i][2]), "=r"(af[i][3]) : "r"(at));
      }
#pragma unroll
      for (int j = 0; j < FN; j += 2) {
        const uint32_t at =
            sb + swz_at(wn * TN + j * 8 + (lane & 7) + ((lane >> 4) << 3), kk * 2 + ((lane >> 3) & 1), CPR);
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(bf[j][0]), "=r"(bf[j][1]), "=r"(bf[j + 1][0]), "=r"(bf[j + 1][1]) : "r"(at));
      }
#pragma unroll
      for (int i = 0; i < FM; i++)
#pragma unroll
        for (int j = 0; j < FN; j++)
          asm volatile(
              "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
              "{%0,%1,%2,%3};\n"
              : "+f"(acc[i][j][0]), "+f"(acc[i][j][1]), "+f"(acc[i][j][2]), "+f"(acc[i][j][3])
              : "r"(af[i][0]), "r"(af[i][1]), "r"(af[i][2]), "r"(af[i][3]), "r"(bf[j][0]), "r"(bf[j][1]));
    }
  }
  cp_wait<0>();
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int i = 0; i < FM; i++)
#pragma unroll
    for (int j = 0; j < FN; j++)
#pragma unroll
      for (int h = 0; h < 2; h++)
        store2(y, M, N, ldy, m0 + wm * TM + i * 16 + g + h * 8, n0 + wn * TN + j * 8 + t * 2, acc[i][j][h * 2],
               acc[i][j][h * 2 + 1]);
}

// 2. wgmma with both operands in shared memory: WG warpgroups of 64 rows, K steps of BK through
// STAGES stages, one CTA-wide barrier a step.
template <int WG, int BN, int BK, int STAGES>
__device__ void gemm_wgmma_ss(float* y, const __half* x, const __half* w, int M, int N, int K, int lda, int ldw,
                              int ldy) {
  constexpr int BM = 64 * WG, THREADS = 128 * WG, CPR = BK / 8;
  constexpr uint32_t A_BYTES = BM * BK * 2, STAGE = (BM + BN) * BK * 2;
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t base = (uint32_t)__cvta_generic_to_shared(smem);
  const int tid = threadIdx.x, wgi = tid >> 7, m0 = blockIdx.y * BM, n0 = blockIdx.x * BN, KT = (K + BK - 1) / BK;
  auto load = [&](int s, int kt) {
    copy_tile<BM, CPR, THREADS, true>(base + s * STAGE, x, m0, M, lda, kt * BK, K, tid);
    copy_tile<BN, CPR, THREADS, true>(base + s * STAGE + A_BYTES, w, n0, N, ldw, kt * BK, K, tid);
  };
  float acc[BN / 2] = {};
#pragma unroll
  for (int s = 0; s < STAGES - 1; s++) {
    if (s < KT) load(s, s);
    cp_commit();
  }
  for (int kt = 0; kt < KT; kt++) {
    cp_wait<STAGES - 2>();
    fence_async();
    __syncthreads();
    if (kt + STAGES - 1 < KT) load((kt + STAGES - 1) % STAGES, kt + STAGES - 1);
    cp_commit();
    const uint32_t sa = base + (kt % STAGES) * STAGE + wgi * 64 * BK * 2, sb = base + (kt % STAGES) * STAGE + A_BYTES;
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; kk++)
      wgmma_ss<BN>(acc, desc(sa + kk * 256, 128, CPR * 128), desc(sb + kk * 256, 128, CPR * 128));
    wg_commit();
    wg_wait<0>();
  }
  cp_wait<0>();
  store_wgmma<BN>(y, acc, M, N, ldy, m0 + wgi * 64, n0);
}

// 3. wgmma with x (A) loaded from global memory straight into registers D steps ahead, and only
// W (B) through a ring of S shared stages of K 16; each step's multiply-add overlaps the next.
template <int WG, int BN, int S, int D>
__device__ void gemm_wgmma_rs(float* y, const __half* x, const __half* w, int M, int N, int K, int lda, int ldw,
                              int ldy) {
  constexpr int BM = 64 * WG, THREADS = 128 * WG, BK = 16, AHEAD = S - 2;
  constexpr uint32_t STAGE = BN * BK * 2;
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t base = (uint32_t)__cvta_generic_to_shared(smem);
  const int tid = threadIdx.x, wgi = tid >> 7, lane = tid & 31, q = (tid >> 5) & 3, g = lane >> 2, t = lane & 3;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN, KT = (K + BK - 1) / BK;
  const int ra = m0 + wgi * 64 + q * 16 + g, rb = ra + 8;
  const __half* xa = x + (size_t)min(ra, M - 1) * lda;
  const __half* xb = x + (size_t)min(rb, M - 1) * lda;
  auto ld32 = [](const __half* p, bool ok) { return ok ? __ldg((const unsigned int*)p) : 0u; };
  // wgmma's A fragment: rows g and g + 8 of the warp's 16, columns 2t and 2t + 8 (+1).
  auto load_x = [&](uint32_t* a, int kt) {
    const int k = kt * BK + 2 * t;
    a[0] = ld32(xa + k, ra < M && k < K);
    a[1] = ld32(xb + k, rb < M && k < K);
    a[2] = ld32(xa + k + 8, ra < M && k + 8 < K);
    a[3] = ld32(xb + k + 8, rb < M && k + 8 < K);
  };
  auto load_w = [&](int s, int kt) {
    copy_tile<BN, 2, THREADS, true>(base + s * STAGE, w, n0, N, ldw, kt * BK, K, tid);
  };
  float acc[BN / 2] = {};
  uint32_t ar[D][4];
#pragma unroll
  for (int s = 0; s < AHEAD; s++) {
    if (s < KT) load_w(s, s);
    cp_commit();
  }
#pragma unroll
  for (int s = 0; s < D; s++) load_x(ar[s], s);
  for (int k0 = 0; k0 < KT; k0 += D) {
#pragma unroll
    for (int i = 0; i < D; i++) {
      const int kt = k0 + i;
      if (kt >= KT) break;
      cp_wait<AHEAD - 1>();
      fence_async();
      __syncthreads();
      if (kt + AHEAD < KT) load_w((kt + AHEAD) % S, kt + AHEAD);
      cp_commit();
      wg_fence();
      wgmma_rs<BN>(acc, ar[i], desc(base + (kt % S) * STAGE, 128, 256));
      wg_commit();
      wg_wait<1>();  // step kt - 1 is done: its registers take step kt - 1 + D
      load_x(ar[(i + D - 1) % D], kt - 1 + D);
    }
  }
  wg_wait<0>();
  cp_wait<0>();
  store_wgmma<BN>(y, acc, M, N, ldy, m0 + wgi * 64, n0);
}

// 4. Warp-specialised: PT producer threads fill S shared stages (K 16) with cp.async and signal each
// stage's mbarrier as its copies land; WG consumer warpgroups wait on it, run wgmma and release the
// stage once their multiply-adds have read it. No CTA-wide barrier in the loop.
template <int WG, int BN, int S, int PT>
__device__ void gemm_wgmma_ws(float* y, const __half* x, const __half* w, int M, int N, int K, int lda, int ldw,
                              int ldy) {
  constexpr int BM = 64 * WG, BK = 16, CPR = 2;
  constexpr uint32_t A_BYTES = BM * BK * 2, STAGE = (BM + BN) * BK * 2;
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t base = (uint32_t)__cvta_generic_to_shared(smem), full = base + S * STAGE, empty = full + S * 8;
  const int tid = threadIdx.x, m0 = blockIdx.y * BM, n0 = blockIdx.x * BN, KT = (K + BK - 1) / BK;
  if (tid == 0) {
    for (int s = 0; s < S; s++) {
      bar_init(full + s * 8, PT);
      bar_init(empty + s * 8, WG * 128);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (tid >= WG * 128) {
    const int p = tid - WG * 128;
    for (int kt = 0; kt < KT; kt++) {
      const int s = kt % S;
      bar_wait(empty + s * 8, ((kt / S) & 1) ^ 1);
      copy_tile<BM, CPR, PT, true>(base + s * STAGE, x, m0, M, lda, kt * BK, K, p);
      copy_tile<BN, CPR, PT, true>(base + s * STAGE + A_BYTES, w, n0, N, ldw, kt * BK, K, p);
      bar_arrive_on_copies(full + s * 8);
    }
    return;
  }
  const int wgi = tid >> 7;
  float acc[BN / 2] = {};
  for (int kt = 0; kt < KT; kt++) {
    const int s = kt % S;
    bar_wait(full + s * 8, (kt / S) & 1);
    fence_async();
    wg_fence();
    wgmma_ss<BN>(acc, desc(base + s * STAGE + wgi * 64 * BK * 2, 128, 256), desc(base + s * STAGE + A_BYTES, 128, 256));
    wg_commit();
    wg_wait<1>();
    if (kt > 0) bar_arrive(empty + ((kt - 1) % S) * 8);
  }
  wg_wait<0>();
  store_wgmma<BN>(y, acc, M, N, ldy, m0 + wgi * 64, n0);
}

// 5. No shared memory: each warp loads its own mma.sync fragments from global memory (16-byte
// loads through L1) one 32-wide K step ahead, K permuted within each step identically for x and W
// so one load per row feeds two k16 multiply-adds.
template <int WARPS_M, int WARPS_N, int FM, int FN>
__device__ void gemm_direct(float* y, const __half* x, const __half* w, int M, int N, int K, int lda, int ldw,
                            int ldy) {
  constexpr int BM = WARPS_M * 16 * FM, BN = WARPS_N * 8 * FN;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int rm = blockIdx.y * BM + (warp / WARPS_N) * 16 * FM, cn = blockIdx.x * BN + (warp % WARPS_N) * 8 * FN;
  auto ld = [&](const __half* base, int r, int rows, int ldr, int k) {
    return r < rows && k + 8 * t < K ? __ldg((const uint4*)(base + (size_t)r * ldr + k + 8 * t)) : make_uint4(0, 0, 0, 0);
  };
  auto word = [](const uint4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; };
  float acc[FM][FN][4] = {};
  uint4 a[2][FM][2], b[2][FN];
  auto load = [&](int buf, int k) {
#pragma unroll
    for (int i = 0; i < FM; i++)
#pragma unroll
      for (int h = 0; h < 2; h++) a[buf][i][h] = ld(x, rm + i * 16 + g + h * 8, M, lda, k);
#pragma unroll
    for (int j = 0; j < FN; j++) b[buf][j] = ld(w, cn + j * 8 + g, N, ldw, k);
  };
  // Words 2s and 2s + 1 of a row's 16 bytes are columns 2t (+1) and 2t + 8 (+1) of k16 step s.
  auto compute = [&](int buf) {
#pragma unroll
    for (int s = 0; s < 2; s++)
#pragma unroll
      for (int i = 0; i < FM; i++)
#pragma unroll
        for (int j = 0; j < FN; j++)
          asm volatile(
              "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
              "{%0,%1,%2,%3};\n"
              : "+f"(acc[i][j][0]), "+f"(acc[i][j][1]), "+f"(acc[i][j][2]), "+f"(acc[i][j][3])
              : "r"(word(a[buf][i][0], 2 * s)), "r"(word(a[buf][i][1], 2 * s)), "r"(word(a[buf][i][0], 2 * s + 1)),
                "r"(word(a[buf][i][1], 2 * s + 1)), "r"(word(b[buf][j], 2 * s)), "r"(word(b[buf][j], 2 * s + 1)));
  };
  load(0, 0);
  for (int k = 0; k < K; k += 64) {
    load(1, k + 32);
    compute(0);
    load(0, k + 64);
    if (k + 32 < K) compute(1);
  }
#pragma unroll
  for (int i = 0; i < FM; i++)
#pragma unroll
    for (int j = 0; j < FN; j++)
#pragma unroll
      for (int h = 0; h < 2; h++)
        store2(y, M, N, ldy, rm + i * 16 + g + h * 8, cn + j * 8 + t * 2, acc[i][j][h * 2], acc[i][j][h * 2 + 1]);
}

}  // namespace

#define GEMM_ARGS float *y, const __half *x, const __half *w, int M, int N, int K, int lda, int ldw, int ldy
#define GEMM_PASS y, x, w, M, N, K, lda, ldw, ldy

// The names the host's table (probe.cpp) launches; the bounds are the thread counts there.
extern "C" __global__ void __launch_bounds__(256) mma_128x128x32_s2(GEMM_ARGS) { gemm_mma<128, 128, 32, 2, 4, 2>(GEMM_PASS); }
extern "C" __global__ void __launch_bounds__(256) wgmma_ss_128x256x16_s3(GEMM_ARGS) { gemm_wgmma_ss<2, 256, 16, 3>(GEMM_PASS); }
extern "C" __global__ void __launch_bounds__(256) wgmma_ss_128x128x32_s2(GEMM_ARGS) { gemm_wgmma_ss<2, 128, 32, 2>(GEMM_PASS); }
extern "C" __global__ void __launch_bounds__(256) wgmma_rs_128x256_s4d4(GEMM_ARGS) { gemm_wgmma_rs<2, 256, 4, 4>(GEMM_PASS); }
extern "C" __global__ void __launch_bounds__(256) wgmma_rs_128x256_s5d8(GEMM_ARGS) { gemm_wgmma_rs<2, 256, 5, 8>(GEMM_PASS); }
extern "C" __global__ void __launch_bounds__(384) wgmma_ws_128x256_s3(GEMM_ARGS) { gemm_wgmma_ws<2, 256, 3, 128>(GEMM_PASS); }
extern "C" __global__ void __launch_bounds__(256, 2) direct_64x128(GEMM_ARGS) { gemm_direct<2, 4, 2, 4>(GEMM_PASS); }

// The GEMM's loads alone: each CTA reads the 128 rows of x and 256 rows of W that a 128 x 256
// tile reads, over all of K, as 16-byte loads into registers, and folds them together.
extern "C" __global__ void __launch_bounds__(256) loads_128x256(GEMM_ARGS) {
  const int m0 = blockIdx.y * 128, n0 = blockIdx.x * 256, cpr = K / 8;
  uint4 v = make_uint4(0, 0, 0, 0);
#pragma unroll 8
  for (int i = threadIdx.x; i < 384 * cpr; i += 256) {
    const int r = i / cpr, c = i % cpr;
    const __half* p = r < 128 ? x + (size_t)min(m0 + r, M - 1) * lda : w + (size_t)min(n0 + r - 128, N - 1) * ldw;
    uint4 u;
    asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(u.x), "=r"(u.y), "=r"(u.z), "=r"(u.w) : "l"(p + c * 8));
    v.x ^= u.x, v.y ^= u.y, v.z ^= u.z, v.w ^= u.w;
  }
  if ((v.x ^ v.y ^ v.z ^ v.w) == 0x9e3779b9u) y[threadIdx.x] = 0.f;  // keeps the loads
}

// Co-residency: each CTA touches `shared` bytes of dynamic shared memory, then spins for spin_ns
// and records its multiprocessor and its start and end times (globaltimer, ns).
extern "C" __global__ void occupancy(unsigned long long* out, unsigned spin_ns) {
  extern __shared__ unsigned sh[];
  unsigned smid;
  unsigned long long t0, t;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  sh[threadIdx.x] = (unsigned)t0;
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < spin_ns);
  __syncthreads();
  if (threadIdx.x == 0) {
    out[blockIdx.x * 3] = smid;
    out[blockIdx.x * 3 + 1] = t0;
    out[blockIdx.x * 3 + 2] = t + (sh[1] & 0);
  }
}
