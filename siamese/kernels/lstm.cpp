// Fused single-layer unidirectional LSTM (batch_first, zero initial state) for x86 CPUs with
// AVX512-BF16. bf16 GEMM operands with fp32 accumulation; fp32 cell state and pointwise math.
//
// Rows (batch elements) are independent through time, so the recurrence runs block-by-block
// over 6 rows at a time with everything for the block kept in L1/L2:
//   forward, per step:  gates = [x_t, h_{t-1}] @ [W_ih | W_hh]^T + b   (K = d+h, one microkernel,
//                       the gate nonlinearities + cell update are fused in its epilogue)
//   backward, per step: dgates from (dout_t + dh_rec, dc);  [dx_t, dh_rec] = dgates @ [W_ih | W_hh]
//   after the loop:     dW = dgates_all^T @ [x, h_prev]_all (one GEMM, fp32 output), db = sum dgates.
// Gate order is PyTorch's (i, f, g, o).
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <immintrin.h>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

constexpr int MR = 6;  // rows per microkernel block

using bf16_t = uint16_t;

// ---------------------------------------------------------------- math helpers
static inline __m512 exp512(__m512 x) {
  x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.0f)), _mm512_set1_ps(-88.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

static inline __m512 recip512(__m512 d) {
  __m512 y = _mm512_rcp14_ps(d);
  // one Newton step: y * (2 - d*y)
  return _mm512_mul_ps(y, _mm512_fnmadd_ps(d, y, _mm512_set1_ps(2.0f)));
}

static inline __m512 sigmoid512(__m512 x) {
  return recip512(_mm512_add_ps(_mm512_set1_ps(1.0f), exp512(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}

static inline __m512 tanh512(__m512 x) {
  // tanh(x) = 2 * sigmoid(2x) - 1
  const __m512 s = sigmoid512(_mm512_add_ps(x, x));
  return _mm512_fmsub_ps(s, _mm512_set1_ps(2.0f), _mm512_set1_ps(1.0f));
}

static inline __m256i to_bf16(__m512 v) { return (__m256i)_mm512_cvtneps_pbh(v); }

static inline __m512 from_bf16(const bf16_t* p) {
  return _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)p)), 16));
}

// ---------------------------------------------------------------- microkernel
// C[i][q][16] = sum_p A[i][2p:2p+2] . B[p][q]   (B: K2 x NC zmm of 16 column-pairs)
// Kept out of line so that the 24 accumulators own the register file (no spills).
template <int M, int NC>
__attribute__((noinline)) void mk(const bf16_t* A, int64_t lda, const __m512i* B, int K2, float* C) {
  __m512 acc[M][NC];
#pragma GCC unroll 6
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int q = 0; q < NC; ++q) acc[i][q] = _mm512_setzero_ps();
  const int32_t* a32 = reinterpret_cast<const int32_t*>(A);
  const int64_t l32 = lda / 2;
  for (int p = 0; p < K2; ++p) {
    __m512i b[NC];
#pragma GCC unroll 4
    for (int q = 0; q < NC; ++q) b[q] = _mm512_loadu_si512(B + p * NC + q);
#pragma GCC unroll 6
    for (int i = 0; i < M; ++i) {
      const __m512i a = _mm512_set1_epi32(a32[i * l32 + p]);
#pragma GCC unroll 4
      for (int q = 0; q < NC; ++q)
        acc[i][q] = _mm512_dpbf16_ps(acc[i][q], (__m512bh)a, (__m512bh)b[q]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int q = 0; q < NC; ++q) _mm512_store_ps(C + (i * 4 + q) * 16, acc[i][q]);
}

// Pack W (R x C, fp32, row-major) as bf16 pairs along R for use as the B operand of
// out = A (.. x R) @ W (R x C): layout [group of 4 col tiles][p][col tile in group][16][2].
// Columns are grouped in tiles of 16; `col_of(tile, lane)` maps to the source column.
template <typename ColOf>
static void pack_pairs(const float* W, int64_t ldw, int R, int ntiles, ColOf col_of, bf16_t* out) {
  const int K2 = R / 2;
  int64_t o = 0;
  for (int g = 0; g < ntiles; g += 4) {
    const int nc = std::min(4, ntiles - g);
    for (int p = 0; p < K2; ++p)
      for (int q = 0; q < nc; ++q)
        for (int l = 0; l < 16; ++l) {
          const int64_t c = col_of(g + q, l);
          for (int e = 0; e < 2; ++e) {
            const float v = W[(int64_t)(2 * p + e) * ldw + c];
            out[o++] = c10::BFloat16(v).x;  // round-to-nearest-even
          }
        }
  }
}

// ---------------------------------------------------------------- forward
template <int M>
static void fwd_block(int64_t r0, int T, int d, int h, bf16_t* xh, const __m512i* Wf, const float* bias,
                      float* out, float* gates, float* cs) {
  const int D = d + h, G = 4 * h, K2 = D / 2, HT = h / 16;
  const int64_t lda = (int64_t)T * D;
  alignas(64) float c[MR][512];
  std::vector<float> cvec;
  float* cst = &c[0][0];
  int64_t cstride = 512;
  if (h > 512) { cvec.assign((size_t)MR * h, 0.f); cst = cvec.data(); cstride = h; }
  for (int i = 0; i < M; ++i) std::memset(cst + i * cstride, 0, sizeof(float) * h);
  alignas(64) float acc[MR * 4 * 16];
  for (int t = 0; t < T; ++t) {
    const bf16_t* A = xh + (r0 * T + t) * D;
    for (int ht = 0; ht < HT; ++ht) {
      mk<M, 4>(A, lda, Wf + (int64_t)ht * K2 * 4, K2, acc);
      const int j = ht * 16;
      const __m512 bi = _mm512_loadu_ps(bias + j), bf = _mm512_loadu_ps(bias + h + j),
                   bg = _mm512_loadu_ps(bias + 2 * h + j), bo = _mm512_loadu_ps(bias + 3 * h + j);
#pragma GCC unroll 6
      for (int i = 0; i < M; ++i) {
        const int64_t rt = (r0 + i) * T + t;
        const __m512 ig = sigmoid512(_mm512_add_ps(_mm512_load_ps(acc + (i * 4 + 0) * 16), bi));
        const __m512 fg = sigmoid512(_mm512_add_ps(_mm512_load_ps(acc + (i * 4 + 1) * 16), bf));
        const __m512 gg = tanh512(_mm512_add_ps(_mm512_load_ps(acc + (i * 4 + 2) * 16), bg));
        const __m512 og = sigmoid512(_mm512_add_ps(_mm512_load_ps(acc + (i * 4 + 3) * 16), bo));
        float* cp = cst + i * cstride + j;
        const __m512 cn = _mm512_fmadd_ps(fg, _mm512_loadu_ps(cp), _mm512_mul_ps(ig, gg));
        const __m512 hn = _mm512_mul_ps(og, tanh512(cn));
        _mm512_storeu_ps(cp, cn);
        float* gp = gates + rt * G + j;
        _mm512_storeu_ps(gp, ig);
        _mm512_storeu_ps(gp + h, fg);
        _mm512_storeu_ps(gp + 2 * h, gg);
        _mm512_storeu_ps(gp + 3 * h, og);
        _mm512_storeu_ps(cs + rt * h + j, cn);
        _mm512_storeu_ps(out + rt * h + j, hn);
        if (t + 1 < T) _mm256_storeu_si256((__m256i*)(xh + (rt + 1) * D + d + j), to_bf16(hn));
      }
    }
  }
}

// ---------------------------------------------------------------- backward
template <int M>
static void bwd_block(int64_t r0, int T, int d, int h, const float* dout, const float* gates, const float* cs,
                      const __m512i* Wb, bf16_t* dg, float* dx, float* dbacc) {
  const int D = d + h, G = 4 * h, K2 = G / 2, CT = D / 16, HT = h / 16;
  std::vector<float> st((size_t)2 * MR * h + 64);
  float* dhr = st.data();        // recurrent dh  [MR][h]
  float* dcb = dhr + MR * h;     // dc carried    [MR][h]
  std::fill(st.begin(), st.end(), 0.f);
  const int64_t lda = (int64_t)T * G;
  alignas(64) float acc[MR * 4 * 16];
  for (int t = T - 1; t >= 0; --t) {
    // pointwise: dgates for the block's rows at step t
    for (int i = 0; i < M; ++i) {
      const int64_t rt = (r0 + i) * T + t;
      const float* gp = gates + rt * G;
      const float* cp = cs + rt * h;
      const float* dop = dout + rt * h;
      bf16_t* dgp = dg + rt * G;
      for (int ht = 0; ht < HT; ++ht) {
        const int j = ht * 16;
        const __m512 one = _mm512_set1_ps(1.0f);
        const __m512 ig = _mm512_loadu_ps(gp + j), fg = _mm512_loadu_ps(gp + h + j),
                     gg = _mm512_loadu_ps(gp + 2 * h + j), og = _mm512_loadu_ps(gp + 3 * h + j);
        const __m512 c = _mm512_loadu_ps(cp + j);
        const __m512 cprev = t > 0 ? _mm512_loadu_ps(cp - h + j) : _mm512_setzero_ps();
        const __m512 dh = _mm512_add_ps(_mm512_loadu_ps(dop + j), _mm512_loadu_ps(dhr + i * h + j));
        const __m512 tc = tanh512(c);
        // dc = dc_next + dh * o * (1 - tanh(c)^2)
        const __m512 dc = _mm512_fmadd_ps(_mm512_mul_ps(dh, og), _mm512_fnmadd_ps(tc, tc, one),
                                          _mm512_loadu_ps(dcb + i * h + j));
        const __m512 dpo = _mm512_mul_ps(_mm512_mul_ps(dh, tc), _mm512_mul_ps(og, _mm512_sub_ps(one, og)));
        const __m512 dpi = _mm512_mul_ps(_mm512_mul_ps(dc, gg), _mm512_mul_ps(ig, _mm512_sub_ps(one, ig)));
        const __m512 dpg = _mm512_mul_ps(_mm512_mul_ps(dc, ig), _mm512_fnmadd_ps(gg, gg, one));
        const __m512 dpf = _mm512_mul_ps(_mm512_mul_ps(dc, cprev), _mm512_mul_ps(fg, _mm512_sub_ps(one, fg)));
        _mm512_storeu_ps(dcb + i * h + j, _mm512_mul_ps(dc, fg));
        _mm256_storeu_si256((__m256i*)(dgp + j), to_bf16(dpi));
        _mm256_storeu_si256((__m256i*)(dgp + h + j), to_bf16(dpf));
        _mm256_storeu_si256((__m256i*)(dgp + 2 * h + j), to_bf16(dpg));
        _mm256_storeu_si256((__m256i*)(dgp + 3 * h + j), to_bf16(dpo));
        _mm512_storeu_ps(dbacc + j, _mm512_add_ps(_mm512_loadu_ps(dbacc + j), dpi));
        _mm512_storeu_ps(dbacc + h + j, _mm512_add_ps(_mm512_loadu_ps(dbacc + h + j), dpf));
        _mm512_storeu_ps(dbacc + 2 * h + j, _mm512_add_ps(_mm512_loadu_ps(dbacc + 2 * h + j), dpg));
        _mm512_storeu_ps(dbacc + 3 * h + j, _mm512_add_ps(_mm512_loadu_ps(dbacc + 3 * h + j), dpo));
      }
    }
    // [dx_t, dh_{t-1}] = dgates_t @ [W_ih | W_hh]
    const bf16_t* A = dg + (r0 * T + t) * G;
    for (int g = 0; g < CT; g += 4) {
      const int nc = std::min(4, CT - g);
      const __m512i* B = Wb + (int64_t)g * K2;
      switch (nc) {
        case 4: mk<M, 4>(A, lda, B, K2, acc); break;
        case 3: mk<M, 3>(A, lda, B, K2, acc); break;
        case 2: mk<M, 2>(A, lda, B, K2, acc); break;
        default: mk<M, 1>(A, lda, B, K2, acc); break;
      }
      for (int i = 0; i < M; ++i) {
        const int64_t rt = (r0 + i) * T + t;
        for (int q = 0; q < nc; ++q) {
          const int col = (g + q) * 16;
          if (col < d) _mm512_storeu_ps(dx + rt * d + col, _mm512_load_ps(acc + (i * 4 + q) * 16));
          else _mm512_storeu_ps(dhr + i * h + (col - d), _mm512_load_ps(acc + (i * 4 + q) * 16));
        }
      }
    }
  }
}

// dW (G x D, fp32) = sum_r dg[r]^T (G) outer xh[r] (D), bf16 inputs, fp32 accumulation.
// Operands are rows of dg (N x G) and xh (N x D). Uses pairs of rows as the dot-product dim.
static void weight_grad(const bf16_t* dg, const bf16_t* xh, int64_t N, int G, int D, float* dW) {
  // Repack: A' [G][N2][2] (dg transposed, row pairs interleaved); B' [CTgroups][N2][4][16][2].
  const int64_t N2 = (N + 1) / 2;
  const int CT = D / 16;
  std::vector<bf16_t> At((size_t)G * N2 * 2), Bp((size_t)CT * 16 * N2 * 2);
  for (int64_t p = 0; p < N2; ++p) {
    const bf16_t* r0 = dg + 2 * p * G;
    const bool has1 = 2 * p + 1 < N;
    const bf16_t* r1 = dg + (2 * p + 1) * G;
    for (int j = 0; j < G; ++j) {
      At[((size_t)j * N2 + p) * 2] = r0[j];
      At[((size_t)j * N2 + p) * 2 + 1] = has1 ? r1[j] : 0;
    }
  }
  for (int g = 0; g < CT; g += 4) {
    const int nc = std::min(4, CT - g);
    bf16_t* base = Bp.data() + (size_t)g * 16 * N2 * 2;
    for (int64_t p = 0; p < N2; ++p) {
      const bf16_t* x0 = xh + 2 * p * D;
      const bool has1 = 2 * p + 1 < N;
      const bf16_t* x1 = xh + (2 * p + 1) * D;
      bf16_t* o = base + (size_t)p * nc * 32;
      for (int q = 0; q < nc; ++q)
        for (int l = 0; l < 16; ++l) {
          const int c = (g + q) * 16 + l;
          o[q * 32 + 2 * l] = x0[c];
          o[q * 32 + 2 * l + 1] = has1 ? x1[c] : 0;
        }
    }
  }
  // Blocks of K (pairs) to keep B in L2 and accumulate in fp32 into dW.
  const int64_t KB = 512;
  std::memset(dW, 0, sizeof(float) * G * D);
  at::parallel_for(0, (G + MR - 1) / MR, 1, [&](int64_t b0, int64_t b1) {
    alignas(64) float acc[MR * 4 * 16];
    for (int64_t kb = 0; kb < N2; kb += KB) {
      const int kn = (int)std::min(KB, N2 - kb);
      for (int64_t b = b0; b < b1; ++b) {
        const int j0 = (int)b * MR, m = std::min(MR, G - j0);
        const bf16_t* A = At.data() + ((size_t)j0 * N2 + kb) * 2;
        for (int g = 0; g < CT; g += 4) {
          const int nc = std::min(4, CT - g);
          const __m512i* B = reinterpret_cast<const __m512i*>(Bp.data() + (size_t)g * 16 * N2 * 2) + kb * nc;
#define WG_CASE(MM)                                                         \
  case MM:                                                                  \
    if (nc == 4) mk<MM, 4>(A, N2 * 2, B, kn, acc);                       \
    else if (nc == 3) mk<MM, 3>(A, N2 * 2, B, kn, acc);                  \
    else if (nc == 2) mk<MM, 2>(A, N2 * 2, B, kn, acc);                  \
    else mk<MM, 1>(A, N2 * 2, B, kn, acc);                               \
    break;
          switch (m) { WG_CASE(6) WG_CASE(5) WG_CASE(4) WG_CASE(3) WG_CASE(2) WG_CASE(1) }
#undef WG_CASE
          for (int i = 0; i < m; ++i)
            for (int q = 0; q < nc; ++q) {
              float* o = dW + (int64_t)(j0 + i) * D + (g + q) * 16;
              _mm512_storeu_ps(o, _mm512_add_ps(_mm512_loadu_ps(o), _mm512_load_ps(acc + (i * 4 + q) * 16)));
            }
        }
      }
    }
  });
}

void check_inputs(const at::Tensor& x, const at::Tensor& w_ih, const at::Tensor& w_hh) {
  TORCH_CHECK(x.dim() == 3, "x must be (n, T, d)");
  TORCH_CHECK(!x.is_cuda(), "CPU only");
  const int64_t d = x.size(2), h = w_hh.size(1);
  TORCH_CHECK(w_ih.size(0) == 4 * h && w_ih.size(1) == d && w_hh.size(0) == 4 * h, "weight shapes");
  TORCH_CHECK(d % 16 == 0 && h % 16 == 0, "d and h must be multiples of 16");
}

}  // namespace

// Returns (out fp32 (n,T,h), xh bf16 (n,T,d+h), gates fp32 (n,T,4h), c fp32 (n,T,h)).
std::vector<at::Tensor> lstm_forward(const at::Tensor& x_, const at::Tensor& w_ih_, const at::Tensor& w_hh_,
                                     const at::Tensor& bias_) {
  check_inputs(x_, w_ih_, w_hh_);
  const int64_t n = x_.size(0), T = x_.size(1), d = x_.size(2), h = w_hh_.size(1), D = d + h, G = 4 * h;
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  at::Tensor w_ih = w_ih_.to(at::kFloat).contiguous(), w_hh = w_hh_.to(at::kFloat).contiguous();
  at::Tensor bias = bias_.to(at::kFloat).contiguous();
  at::Tensor out = at::empty({n, T, h}, f32), gates = at::empty({n, T, G}, f32), cs = at::empty({n, T, h}, f32);
  at::Tensor xh = at::empty({n, T, D}, f32.dtype(at::kBFloat16));
  if (n == 0 || T == 0) return {out, xh, gates, cs};
  xh.narrow(2, 0, d).copy_(x_);
  xh.select(1, 0).narrow(1, d, h).zero_();
  // Wcat^T as B operand: W (D x G) = [W_ih | W_hh]^T, column tiles = (hidden tile, gate).
  at::Tensor wcat_t = at::cat({w_ih, w_hh}, 1).t().contiguous();  // (D, G)
  const int HT = (int)h / 16;
  // packed layout wanted: [ht][p][q][32]; pack_pairs groups 4 consecutive col tiles -> tile index ht*4+q
  at::Tensor Wf = at::empty({(int64_t)HT * 4 * 16 * D + 32}, f32.dtype(at::kBFloat16));
  bf16_t* wfp = reinterpret_cast<bf16_t*>(Wf.data_ptr<at::BFloat16>());
  wfp = reinterpret_cast<bf16_t*>((reinterpret_cast<uintptr_t>(wfp) + 63) & ~uintptr_t(63));
  pack_pairs(wcat_t.data_ptr<float>(), G, (int)D, HT * 4,
             [h](int tile, int l) { return (int64_t)(tile % 4) * h + (tile / 4) * 16 + l; }, wfp);
  const __m512i* W = reinterpret_cast<const __m512i*>(wfp);
  bf16_t* xhp = reinterpret_cast<bf16_t*>(xh.data_ptr<at::BFloat16>());
  const float* bp = bias.data_ptr<float>();
  float *op = out.data_ptr<float>(), *gp = gates.data_ptr<float>(), *cp = cs.data_ptr<float>();
  const int64_t nb = (n + MR - 1) / MR;
  at::parallel_for(0, nb, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t r0 = b * MR;
      const int m = (int)std::min<int64_t>(MR, n - r0);
      switch (m) {
        case 6: fwd_block<6>(r0, T, d, h, xhp, W, bp, op, gp, cp); break;
        case 5: fwd_block<5>(r0, T, d, h, xhp, W, bp, op, gp, cp); break;
        case 4: fwd_block<4>(r0, T, d, h, xhp, W, bp, op, gp, cp); break;
        case 3: fwd_block<3>(r0, T, d, h, xhp, W, bp, op, gp, cp); break;
        case 2: fwd_block<2>(r0, T, d, h, xhp, W, bp, op, gp, cp); break;
        default: fwd_block<1>(r0, T, d, h, xhp, W, bp, op, gp, cp); break;
      }
    }
  });
  return {out, xh, gates, cs};
}

// Returns (dx fp32 (n,T,d), dW_ih (4h,d), dW_hh (4h,h), db (4h)).
std::vector<at::Tensor> lstm_backward(const at::Tensor& dout_, const at::Tensor& xh, const at::Tensor& gates,
                                      const at::Tensor& cs, const at::Tensor& w_ih_, const at::Tensor& w_hh_) {
  const int64_t n = gates.size(0), T = gates.size(1), G = gates.size(2), h = G / 4, D = xh.size(2), d = D - h;
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  at::Tensor dout = dout_.to(at::kFloat).contiguous();
  at::Tensor dx = at::empty({n, T, d}, f32);
  at::Tensor dW = at::empty({G, D}, f32);
  at::Tensor db = at::zeros({G}, f32);
  if (n == 0 || T == 0) {
    dx.zero_(); dW.zero_();
    return {dx, dW.narrow(1, 0, d).contiguous(), dW.narrow(1, d, h).contiguous(), db};
  }
  at::Tensor wcat = at::cat({w_ih_.to(at::kFloat), w_hh_.to(at::kFloat)}, 1).contiguous();  // (G, D)
  const int CT = (int)D / 16;
  at::Tensor Wb = at::empty({(int64_t)CT * 16 * G + 32}, f32.dtype(at::kBFloat16));
  bf16_t* wbp = reinterpret_cast<bf16_t*>(Wb.data_ptr<at::BFloat16>());
  wbp = reinterpret_cast<bf16_t*>((reinterpret_cast<uintptr_t>(wbp) + 63) & ~uintptr_t(63));
  pack_pairs(wcat.data_ptr<float>(), D, (int)G, CT, [](int tile, int l) { return (int64_t)tile * 16 + l; }, wbp);
  const __m512i* W = reinterpret_cast<const __m512i*>(wbp);
  at::Tensor dg = at::empty({n, T, G}, f32.dtype(at::kBFloat16));
  bf16_t* dgp = reinterpret_cast<bf16_t*>(dg.data_ptr<at::BFloat16>());
  const float *dop = dout.data_ptr<float>(), *gp = gates.data_ptr<float>(), *cp = cs.data_ptr<float>();
  float* dxp = dx.data_ptr<float>();
  const int64_t nb = (n + MR - 1) / MR;
  const int nthreads = at::get_num_threads();
  std::vector<float> dbparts((size_t)nthreads * G, 0.f);
  at::parallel_for(0, nb, 1, [&](int64_t b0, int64_t b1) {
    float* dbacc = dbparts.data() + (size_t)at::get_thread_num() * G;
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t r0 = b * MR;
      const int m = (int)std::min<int64_t>(MR, n - r0);
      switch (m) {
        case 6: bwd_block<6>(r0, T, d, h, dop, gp, cp, W, dgp, dxp, dbacc); break;
        case 5: bwd_block<5>(r0, T, d, h, dop, gp, cp, W, dgp, dxp, dbacc); break;
        case 4: bwd_block<4>(r0, T, d, h, dop, gp, cp, W, dgp, dxp, dbacc); break;
        case 3: bwd_block<3>(r0, T, d, h, dop, gp, cp, W, dgp, dxp, dbacc); break;
        case 2: bwd_block<2>(r0, T, d, h, dop, gp, cp, W, dgp, dxp, dbacc); break;
        default: bwd_block<1>(r0, T, d, h, dop, gp, cp, W, dgp, dxp, dbacc); break;
      }
    }
  });
  float* dbp = db.data_ptr<float>();
  for (int k = 0; k < nthreads; ++k)
    for (int64_t j = 0; j < G; ++j) dbp[j] += dbparts[(size_t)k * G + j];
  weight_grad(dgp, reinterpret_cast<const bf16_t*>(xh.data_ptr<at::BFloat16>()), n * T, (int)G, (int)D,
              dW.data_ptr<float>());
  return {dx, dW.narrow(1, 0, d).contiguous(), dW.narrow(1, d, h).contiguous(), db};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &lstm_forward, "fused LSTM forward (bf16 GEMM, fp32 state)");
  m.def("backward", &lstm_backward, "fused LSTM backward");
}
