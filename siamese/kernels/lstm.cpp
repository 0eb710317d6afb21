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
// exp(x) for x <= 88 (callers clamp): 2^(x*log2e) with a degree-6 polynomial for 2^f, |f| <= 0.5.
static inline __m512 exp512(__m512 x) {
  const __m512 t = _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f));
  const __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(t, n);
  __m512 p = _mm512_set1_ps(1.5403530e-4f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.3333558e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.6181291e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5504109e-2f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022651e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9314718e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

static inline __m512 recip512(__m512 d) {
  __m512 y = _mm512_rcp14_ps(d);
  // one Newton step: y * (2 - d*y)
  return _mm512_mul_ps(y, _mm512_fnmadd_ps(d, y, _mm512_set1_ps(2.0f)));
}

static inline __m512 sigmoid512(__m512 x) {
  const __m512 e = exp512(_mm512_min_ps(_mm512_sub_ps(_mm512_setzero_ps(), x), _mm512_set1_ps(80.0f)));
  return recip512(_mm512_add_ps(_mm512_set1_ps(1.0f), e));
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
// C[i][q][16] = sum_p A(i, p) . B[p][q]  with A(i, p) = 32-bit bf16 pair A[i*a_rs + p*a_ps] (broadcast)
// and B[p][q] = zmm of 16 column-pairs at B[p*b_ps + q]. Kept out of line so that the
// M*NC accumulators own the register file (no spills).
template <int M, int NC>
__attribute__((noinline)) void mk(const int32_t* A, int64_t a_rs, int64_t a_ps, const __m512i* B, int64_t b_ps,
                                  int K2, float* C) {
  __m512 acc[M][NC];
#pragma GCC unroll 6
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int q = 0; q < NC; ++q) acc[i][q] = _mm512_setzero_ps();
  for (int p = 0; p < K2; ++p) {
    __m512i b[NC];
#pragma GCC unroll 4
    for (int q = 0; q < NC; ++q) b[q] = _mm512_loadu_si512(B + p * b_ps + q);
#pragma GCC unroll 6
    for (int i = 0; i < M; ++i) {
      const __m512i a = _mm512_set1_epi32(A[i * a_rs + p * a_ps]);
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

// out[2k + e] = (e ? b : a)[k] for 16 bf16 from each of a, b (b may be null -> zeros).
static inline void interleave16(const bf16_t* a, const bf16_t* b, bf16_t* out) {
  static const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                              23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m256i va = _mm256_loadu_si256((const __m256i*)a);
  const __m256i vb = b ? _mm256_loadu_si256((const __m256i*)b) : _mm256_setzero_si256();
  const __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(va), vb, 1);
  _mm512_storeu_si512(out, _mm512_permutexvar_epi16(idx, v));
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
                      float* out, float* saved) {
  const int D = d + h, K2 = D / 2, HT = h / 16;
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
      mk<M, 4>(reinterpret_cast<const int32_t*>(A), lda / 2, 1, Wf + (int64_t)ht * K2 * 4, 4, K2, acc);
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
        const __m512 cprev = _mm512_loadu_ps(cp);
        const __m512 cn = _mm512_fmadd_ps(fg, cprev, _mm512_mul_ps(ig, gg));
        const __m512 tc = tanh512(cn);
        const __m512 hn = _mm512_mul_ps(og, tc);
        _mm512_storeu_ps(cp, cn);
        _mm512_storeu_ps(out + rt * h + j, hn);
        // derivative factors for backward (see bwd_block)
        const __m512 one = _mm512_set1_ps(1.0f);
        float* sp = saved + rt * 6 * h + j;
        _mm512_stream_ps(sp, _mm512_mul_ps(tc, _mm512_mul_ps(og, _mm512_sub_ps(one, og))));
        _mm512_stream_ps(sp + h, _mm512_mul_ps(og, _mm512_fnmadd_ps(tc, tc, one)));
        _mm512_stream_ps(sp + 2 * h, _mm512_mul_ps(gg, _mm512_mul_ps(ig, _mm512_sub_ps(one, ig))));
        _mm512_stream_ps(sp + 3 * h, _mm512_mul_ps(ig, _mm512_fnmadd_ps(gg, gg, one)));
        _mm512_stream_ps(sp + 4 * h, _mm512_mul_ps(cprev, _mm512_mul_ps(fg, _mm512_sub_ps(one, fg))));
        _mm512_stream_ps(sp + 5 * h, fg);
        if (t + 1 < T) _mm256_storeu_si256((__m256i*)(xh + (rt + 1) * D + d + j), to_bf16(hn));
      }
    }
  }
}

// ---------------------------------------------------------------- backward
// dgP: dgates as bf16 with row pairs interleaved: [n/2][T][G][2] (pair p = rp*T + t), the layout
// the weight-gradient GEMM consumes directly.
template <int M>
static void bwd_block(int64_t r0, int T, int d, int h, const float* dout, const float* saved,
                      const __m512i* Wb, bf16_t* dgP, float* dx, float* dbacc) {
  const int D = d + h, G = 4 * h, K2 = G / 2, CT = D / 16, HT = h / 16;
  std::vector<float> st((size_t)2 * MR * h, 0.f);
  float* dhr = st.data();        // recurrent dh  [MR][h]
  float* dcb = dhr + MR * h;     // dc carried    [MR][h]
  std::vector<bf16_t> dgrow_v((size_t)MR * G + 32);
  bf16_t* dgrow = dgrow_v.data();  // this step's dgates, row-major [MR][G]
  alignas(64) float acc[MR * 4 * 16];
  for (int t = T - 1; t >= 0; --t) {
    // pointwise: dgates for the block's rows at step t
    for (int i = 0; i < M; ++i) {
      const int64_t rt = (r0 + i) * T + t;
      const float* sp = saved + rt * 6 * h;
      const float* dop = dout + rt * h;
      bf16_t* dgp = dgrow + i * G;
      for (int ht = 0; ht < HT; ++ht) {
        const int j = ht * 16;
        const __m512 dh = _mm512_add_ps(_mm512_loadu_ps(dop + j), _mm512_loadu_ps(dhr + i * h + j));
        const __m512 dc = _mm512_fmadd_ps(dh, _mm512_load_ps(sp + h + j), _mm512_loadu_ps(dcb + i * h + j));
        const __m512 dpo = _mm512_mul_ps(dh, _mm512_load_ps(sp + j));
        const __m512 dpi = _mm512_mul_ps(dc, _mm512_load_ps(sp + 2 * h + j));
        const __m512 dpg = _mm512_mul_ps(dc, _mm512_load_ps(sp + 3 * h + j));
        const __m512 dpf = _mm512_mul_ps(dc, _mm512_load_ps(sp + 4 * h + j));
        _mm512_storeu_ps(dcb + i * h + j, _mm512_mul_ps(dc, _mm512_load_ps(sp + 5 * h + j)));
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
    // pair-interleaved copy for the weight gradient
    for (int i = 0; i < M; i += 2) {
      bf16_t* o = dgP + (((r0 + i) / 2) * T + t) * (int64_t)G * 2;
      const bf16_t* a = dgrow + i * G;
      const bf16_t* b2 = i + 1 < M ? a + G : nullptr;
      for (int j = 0; j < G; j += 16) interleave16(a + j, b2 ? b2 + j : nullptr, o + 2 * j);
    }
    // [dx_t, dh_{t-1}] = dgates_t @ [W_ih | W_hh]
    const int32_t* A = reinterpret_cast<const int32_t*>(dgrow);
    for (int g = 0; g < CT; g += 4) {
      const int nc = std::min(4, CT - g);
      const __m512i* B = Wb + (int64_t)g * K2;
      switch (nc) {
        case 4: mk<M, 4>(A, G / 2, 1, B, 4, K2, acc); break;
        case 3: mk<M, 3>(A, G / 2, 1, B, 3, K2, acc); break;
        case 2: mk<M, 2>(A, G / 2, 1, B, 2, K2, acc); break;
        default: mk<M, 1>(A, G / 2, 1, B, 1, K2, acc); break;
      }
      for (int i = 0; i < M; ++i) {
        const int64_t rt = (r0 + i) * T + t;
        for (int q = 0; q < nc; ++q) {
          const int col = (g + q) * 16;
          const __m512 v = _mm512_load_ps(acc + (i * 4 + q) * 16);
          if (col < d) _mm512_storeu_ps(dx + rt * d + col, v);
          else _mm512_storeu_ps(dhr + i * h + (col - d), v);
        }
      }
    }
  }
}

// dW (G x D, fp32) = sum_n dg[n]^T xh[n]; both operands pair-interleaved over n: dgP [N2][G][2],
// xhP [N2][D][2]. bf16 inputs, fp32 accumulation.
static void weight_grad(const bf16_t* dgP, const bf16_t* xhP, int64_t N2, int G, int D, float* dW) {
  const int CT = D / 16;
  const int64_t KB = 128;
  std::memset(dW, 0, sizeof(float) * G * D);
  const int32_t* A0 = reinterpret_cast<const int32_t*>(dgP);
  const __m512i* B0 = reinterpret_cast<const __m512i*>(xhP);
  at::parallel_for(0, (G + MR - 1) / MR, 1, [&](int64_t b0, int64_t b1) {
    alignas(64) float acc[MR * 4 * 16];
    for (int64_t kb = 0; kb < N2; kb += KB) {
      const int kn = (int)std::min(KB, N2 - kb);
      for (int g = 0; g < CT; g += 4) {
        const int nc = std::min(4, CT - g);
        const __m512i* B = B0 + kb * CT + g;
        for (int64_t b = b0; b < b1; ++b) {
          const int j0 = (int)b * MR, m = std::min(MR, G - j0);
          const int32_t* A = A0 + kb * G + j0;
#define WG_CASE(MM)                                                         \
  case MM:                                                                  \
    if (nc == 4) mk<MM, 4>(A, 1, G, B, CT, kn, acc);                        \
    else if (nc == 3) mk<MM, 3>(A, 1, G, B, CT, kn, acc);                   \
    else if (nc == 2) mk<MM, 2>(A, 1, G, B, CT, kn, acc);                   \
    else mk<MM, 1>(A, 1, G, B, CT, kn, acc);                                \
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

// Returns (out fp32 (n,T,h), xh bf16 (n,T,d+h) = GEMM operand [x_t, h_{t-1}], saved fp32 (n,T,6h) =
// per-step derivative factors for backward).
std::vector<at::Tensor> lstm_forward(const at::Tensor& x_, const at::Tensor& w_ih_, const at::Tensor& w_hh_,
                                     const at::Tensor& bias_) {
  check_inputs(x_, w_ih_, w_hh_);
  const int64_t n = x_.size(0), T = x_.size(1), d = x_.size(2), h = w_hh_.size(1), D = d + h, G = 4 * h;
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  at::Tensor w_ih = w_ih_.to(at::kFloat).contiguous(), w_hh = w_hh_.to(at::kFloat).contiguous();
  at::Tensor bias = bias_.to(at::kFloat).contiguous();
  at::Tensor out = at::empty({n, T, h}, f32), saved = at::empty({n, T, 6 * h}, f32);
  at::Tensor xh = at::empty({n, T, D}, f32.dtype(at::kBFloat16));
  if (n == 0 || T == 0) return {out, xh, saved};
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
  float *op = out.data_ptr<float>(), *sp = saved.data_ptr<float>();
  const int64_t nb = (n + MR - 1) / MR;
  at::parallel_for(0, nb, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t r0 = b * MR;
      const int m = (int)std::min<int64_t>(MR, n - r0);
      switch (m) {
        case 6: fwd_block<6>(r0, T, d, h, xhp, W, bp, op, sp); break;
        case 5: fwd_block<5>(r0, T, d, h, xhp, W, bp, op, sp); break;
        case 4: fwd_block<4>(r0, T, d, h, xhp, W, bp, op, sp); break;
        case 3: fwd_block<3>(r0, T, d, h, xhp, W, bp, op, sp); break;
        case 2: fwd_block<2>(r0, T, d, h, xhp, W, bp, op, sp); break;
        default: fwd_block<1>(r0, T, d, h, xhp, W, bp, op, sp); break;
      }
    }
    _mm_sfence();
  });
  return {out, xh, saved};
}

// Returns (dx fp32 (n,T,d), dW_ih (4h,d), dW_hh (4h,h), db (4h)).
std::vector<at::Tensor> lstm_backward(const at::Tensor& dout_, const at::Tensor& xh, const at::Tensor& saved,
                                      const at::Tensor& w_ih_, const at::Tensor& w_hh_) {
  const int64_t n = saved.size(0), T = saved.size(1), h = saved.size(2) / 6, G = 4 * h, D = xh.size(2), d = D - h;
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
  const int64_t n2 = (n + 1) / 2;
  at::Tensor dg = at::empty({n2, T, G, 2}, f32.dtype(at::kBFloat16));
  bf16_t* dgp = reinterpret_cast<bf16_t*>(dg.data_ptr<at::BFloat16>());
  // xh with row pairs interleaved: [n2][T][D][2]
  at::Tensor xhP = at::empty({n2, T, D, 2}, f32.dtype(at::kBFloat16));
  {
    const bf16_t* src = reinterpret_cast<const bf16_t*>(xh.data_ptr<at::BFloat16>());
    bf16_t* dst = reinterpret_cast<bf16_t*>(xhP.data_ptr<at::BFloat16>());
    at::parallel_for(0, n2, 1, [&](int64_t p0, int64_t p1) {
      for (int64_t rp = p0; rp < p1; ++rp)
        for (int64_t t = 0; t < T; ++t) {
          const bf16_t* a = src + ((2 * rp) * T + t) * D;
          const bf16_t* b = 2 * rp + 1 < n ? a + T * D : nullptr;
          bf16_t* o = dst + (rp * T + t) * D * 2;
          for (int64_t c = 0; c < D; c += 16) interleave16(a + c, b ? b + c : nullptr, o + 2 * c);
        }
    });
  }
  const float *dop = dout.data_ptr<float>(), *sp = saved.data_ptr<float>();
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
        case 6: bwd_block<6>(r0, T, d, h, dop, sp, W, dgp, dxp, dbacc); break;
        case 5: bwd_block<5>(r0, T, d, h, dop, sp, W, dgp, dxp, dbacc); break;
        case 4: bwd_block<4>(r0, T, d, h, dop, sp, W, dgp, dxp, dbacc); break;
        case 3: bwd_block<3>(r0, T, d, h, dop, sp, W, dgp, dxp, dbacc); break;
        case 2: bwd_block<2>(r0, T, d, h, dop, sp, W, dgp, dxp, dbacc); break;
        default: bwd_block<1>(r0, T, d, h, dop, sp, W, dgp, dxp, dbacc); break;
      }
    }
  });
  float* dbp = db.data_ptr<float>();
  for (int k = 0; k < nthreads; ++k)
    for (int64_t j = 0; j < G; ++j) dbp[j] += dbparts[(size_t)k * G + j];
  weight_grad(dgp, reinterpret_cast<const bf16_t*>(xhP.data_ptr<at::BFloat16>()), n2 * T, (int)G, (int)D,
              dW.data_ptr<float>());
  return {dx, dW.narrow(1, 0, d).contiguous(), dW.narrow(1, d, h).contiguous(), db};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &lstm_forward, "fused LSTM forward (bf16 GEMM, fp32 state)");
  m.def("backward", &lstm_backward, "fused LSTM backward");
}
