// C++ loops for the training hot path, built on first use by siamese/kernels.py.
//
// 1. Embedding -> LSTM -> mean over real tokens as one training kernel (forward and backward),
//    for CPUs with native bfloat16 (used by siamese/encoders/fused_lstm.py):
// - The input projection x W_ih^T + b is computed once per distinct token of the batch (P, one
//   row per token id), not once per position; its backward sums the gate gradients per token
//   (d_P), so every input-side matmul shrinks to the batch's vocabulary.
// - Rows are taken longest first, so at step t only the rows still inside their text (a prefix)
//   are computed: no work on padding.
// - Matmuls in bf16 with fp32 accumulation (as under bf16 autocast); gate math in fp32; the step
//   loop in C++ without the GIL, so length groups run side by side on worker threads.
// - Matmul sizes are rounded up (rows of zeros), so a training run meets a few hundred shapes
//   and oneDNN's primitive cache keeps them all: a new shape costs ~0.2 ms of JIT, 3x the matmul.
// Gate order i, f, g, o and both biases, as nn.LSTM.
//
// 2. One lazy Adam step over the rows of a sparse gradient, in one pass (siamese/optim.py).
#include <torch/extension.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace {

// e^x inline, so the gate loops vectorise without calls that spill every vector register:
// e^x = 2^n e^f with n = round(x / ln 2) and |f| <= ln(2) / 2, e^f by its Taylor series to f^6
// (relative error ~1e-7, a float's precision).
inline float exp_(float x) {
  x = std::fmin(std::fmax(x, -87.f), 88.f);
  const float n = std::nearbyint(x * 1.44269504f);
  const float f = std::fma(n, -0.693147182f, x);
  float p = 1.f / 720;
  p = std::fma(p, f, 1.f / 120);
  p = std::fma(p, f, 1.f / 24);
  p = std::fma(p, f, 1.f / 6);
  p = std::fma(p, f, 0.5f);
  p = std::fma(p, f, 1.f);
  p = std::fma(p, f, 1.f);
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return p * scale;
}

inline float sigmoid(float x) { return 1.f / (1.f + exp_(-x)); }
inline float tanh_(float x) { return 2.f / (1.f + exp_(-2.f * x)) - 1.f; }

inline uint16_t to_bf16(float f) {  // round to nearest even (finite values)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float from_bf16(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t* bf16_ptr(const at::Tensor& t) { return reinterpret_cast<uint16_t*>(t.data_ptr<at::BFloat16>()); }

inline int64_t round_up(int64_t x, int64_t step) { return (x + step - 1) / step * step; }

// active[t]: how many rows (sorted longest first) are still inside their text at step t.
std::vector<int64_t> active_rows(const at::Tensor& sorted_lengths, int64_t T) {
  const int64_t n = sorted_lengths.size(0);
  const int64_t* len = sorted_lengths.data_ptr<int64_t>();
  std::vector<int64_t> active(T);
  int64_t a = n;
  for (int64_t t = 0; t < T; ++t) {
    while (a > 0 && len[a - 1] <= t) --a;
    active[t] = a;
  }
  return active;
}

void check_cpu(const at::Tensor& t, const char* name, at::ScalarType dtype, int64_t dims) {
  TORCH_CHECK(t.device().is_cpu(), name, " must be a CPU tensor");
  TORCH_CHECK(t.scalar_type() == dtype, name, " must be ", c10::toString(dtype), ", got ", t.scalar_type());
  TORCH_CHECK(t.dim() == dims, name, " must have ", dims, " dimensions, got ", t.dim());
  TORCH_CHECK(t.is_contiguous(), name, " must be contiguous");
}

}  // namespace

// table (V, E) fp32; ids (n, T) int64 right-padded; lengths (n) int64 >= 1; w_ih (4H, E), w_hh (4H, H),
// bias (4H) = b_ih + b_hh, all fp32. Returns the (n, H) mean of the states over each text's real
// tokens, then what backward needs.
std::vector<at::Tensor> lstm_forward(const at::Tensor& table, const at::Tensor& ids, const at::Tensor& lengths,
                                     const at::Tensor& w_ih, const at::Tensor& w_hh, const at::Tensor& bias) {
  // The loops below index raw pointers: every shape and id is checked first (a bad one would read
  // or write outside the buffers instead of raising).
  check_cpu(table, "table", at::kFloat, 2);
  check_cpu(ids, "ids", at::kLong, 2);
  check_cpu(lengths, "lengths", at::kLong, 1);
  check_cpu(w_ih, "w_ih", at::kFloat, 2);
  check_cpu(w_hh, "w_hh", at::kFloat, 2);
  check_cpu(bias, "bias", at::kFloat, 1);
  TORCH_CHECK(ids.size(0) >= 1 && lengths.size(0) == ids.size(0), "lengths must hold one length per row of ids");
  TORCH_CHECK(lengths.min().item<int64_t>() >= 1 && lengths.max().item<int64_t>() <= ids.size(1),
              "every length must be in [1, ids.size(1)]");
  TORCH_CHECK(ids.min().item<int64_t>() >= 0 && ids.max().item<int64_t>() < table.size(0), "ids must index rows of table");
  TORCH_CHECK(w_hh.size(0) == 4 * w_hh.size(1) && w_ih.size(0) == w_hh.size(0) && w_ih.size(1) == table.size(1) &&
                  bias.size(0) == w_hh.size(0),
              "weights must be w_ih (4H, E), w_hh (4H, H), bias (4H) with E the table's width");
  const int64_t n = ids.size(0), H = w_hh.size(1), G = 4 * H;
  const at::Tensor order = at::argsort(lengths, /*stable=*/true, /*dim=*/0, /*descending=*/true);
  const at::Tensor sorted_lengths = lengths.index_select(0, order).contiguous();
  const int64_t T = sorted_lengths[0].item<int64_t>();
  const std::vector<int64_t> active = active_rows(sorted_lengths, T);

  // distinct tokens and where each position reads its projection (time-major, rows longest first)
  const auto uniq = at::_unique2(ids.index_select(0, order).narrow(1, 0, T), /*sorted=*/true, /*return_inverse=*/true);
  const at::Tensor tokens = std::get<0>(uniq);
  const at::Tensor where = std::get<1>(uniq).t().contiguous();
  const int64_t U = tokens.size(0);
  at::Tensor x16 = at::zeros({round_up(U, 64), table.size(1)}, table.options().dtype(at::kBFloat16));
  x16.narrow(0, 0, U).copy_(table.index_select(0, tokens));
  const at::Tensor w_ih16 = w_ih.to(at::kBFloat16);
  const at::Tensor w_hh16 = w_hh.to(at::kBFloat16);
  const at::Tensor w_hh16_t = w_hh16.t().contiguous();
  const at::Tensor P = at::mm(x16, w_ih16.t()).to(at::kFloat).add_(bias);

  const auto f32 = table.options();
  const auto b16 = f32.dtype(at::kBFloat16);
  at::Tensor gates = at::empty({T, n, G}, f32);
  at::Tensor cells = at::empty({T, n, H}, f32);
  // h_t in bf16, zero where a row has ended, plus zero rows up to the rounded size of d_w_hh's matmul
  at::Tensor states16_rows = at::zeros({std::max(T * n, round_up((T - 1) * n, 256)), H}, b16);
  at::Tensor states16 = states16_rows.narrow(0, 0, T * n).view({T, n, H});
  at::Tensor recurrent = at::zeros({n, G}, b16);
  at::Tensor total = at::zeros({n, H}, f32);
  const at::Tensor no_cells = at::zeros({n, H}, f32);  // c_{-1}
  const float* p = P.data_ptr<float>();
  const int64_t* rows = where.data_ptr<int64_t>();
  const uint16_t* rec = bf16_ptr(recurrent);
  float* sum = total.data_ptr<float>();
  for (int64_t t = 0; t < T; ++t) {
    const int64_t a = active[t];
    if (t > 0) {
      const int64_t m = std::min(n, round_up(a, 32));
      at::Tensor out = recurrent.narrow(0, 0, m);
      at::mm_out(out, states16[t - 1].narrow(0, 0, m), w_hh16_t);
    }
    float* g = gates[t].data_ptr<float>();
    float* c = cells[t].data_ptr<float>();
    const float* c_prev = (t > 0 ? cells[t - 1] : no_cells).data_ptr<float>();
    uint16_t* h16 = bf16_ptr(states16[t]);
    for (int64_t r = 0; r < a; ++r) {
      const float* pr = p + rows[t * n + r] * G;
      const uint16_t* rr = rec + r * G;
      float* gr = g + r * G;
      float* cr = c + r * H;
      const float* cpr = c_prev + r * H;
      uint16_t* h16r = h16 + r * H;
      float* sr = sum + r * H;
#pragma omp simd
      for (int64_t k = 0; k < H; ++k) {
        const float i = sigmoid(pr[k] + from_bf16(rr[k]));
        const float f = sigmoid(pr[H + k] + from_bf16(rr[H + k]));
        const float u = tanh_(pr[2 * H + k] + from_bf16(rr[2 * H + k]));
        const float o = sigmoid(pr[3 * H + k] + from_bf16(rr[3 * H + k]));
        const float cn = f * cpr[k] + i * u;
        const float hn = o * tanh_(cn);
        gr[k] = i; gr[H + k] = f; gr[2 * H + k] = u; gr[3 * H + k] = o;
        cr[k] = cn;
        h16r[k] = to_bf16(hn);
        sr[k] += hn;
      }
    }
  }
  at::Tensor mean = at::empty({n, H}, f32);
  mean.index_copy_(0, order, total.div_(sorted_lengths.unsqueeze(1).to(at::kFloat)));
  return {mean, order, sorted_lengths, tokens, where, x16, w_ih16, w_hh16, states16_rows, cells, gates};
}

// d_mean (n, H) fp32 and what forward returned after the mean. Returns d_x (U, E) for the
// embedding rows of `tokens` (fp32), d_w_ih, d_w_hh (4H, *) and d_bias (4H), fp32.
std::vector<at::Tensor> lstm_backward(const at::Tensor& d_mean, const at::Tensor& order, const at::Tensor& sorted_lengths,
                                      const at::Tensor& tokens, const at::Tensor& where, const at::Tensor& x16,
                                      const at::Tensor& w_ih16, const at::Tensor& w_hh16, const at::Tensor& states16_rows,
                                      const at::Tensor& cells, const at::Tensor& gates) {
  const int64_t T = gates.size(0), n = gates.size(1), H = w_hh16.size(1), G = 4 * H, U = tokens.size(0);
  const int64_t U_rows = x16.size(0), K = round_up((T - 1) * n, 256);
  const std::vector<int64_t> active = active_rows(sorted_lengths, T);
  const auto f32 = gates.options();
  const auto b16 = f32.dtype(at::kBFloat16);
  // every real state's share of the mean's gradient, rows longest first
  const at::Tensor d_state = d_mean.index_select(0, order).div_(sorted_lengths.unsqueeze(1).to(at::kFloat)).contiguous();
  // zero where a row has ended and beyond (see states16_rows)
  at::Tensor d_gates16_rows = at::zeros({std::max(T * n, n + K), G}, b16);
  at::Tensor d_gates16 = d_gates16_rows.narrow(0, 0, T * n).view({T, n, G});
  at::Tensor d_P = at::zeros({U_rows, G}, f32);
  at::Tensor d_h16 = at::zeros({n, H}, b16);  // from step t + 1; zero for rows that end at t
  at::Tensor d_c = at::zeros({n, H}, f32);
  const at::Tensor no_cells = at::zeros({n, H}, f32);  // c_{-1}
  const float* ds = d_state.data_ptr<float>();
  float* dp = d_P.data_ptr<float>();
  float* dc = d_c.data_ptr<float>();
  const uint16_t* dh = bf16_ptr(d_h16);
  const int64_t* rows = where.data_ptr<int64_t>();
  for (int64_t t = T - 1; t >= 0; --t) {
    const int64_t a = active[t];
    const float* g = gates[t].data_ptr<float>();
    const float* c = cells[t].data_ptr<float>();
    const float* c_prev = (t > 0 ? cells[t - 1] : no_cells).data_ptr<float>();
    at::Tensor d_gates_t = d_gates16[t];
    uint16_t* dg = bf16_ptr(d_gates_t);
    for (int64_t r = 0; r < a; ++r) {
      const float* gr = g + r * G;
      const float* cr = c + r * H;
      const float* cpr = c_prev + r * H;
      const float* dsr = ds + r * H;
      const uint16_t* dhr = dh + r * H;
      float* dcr = dc + r * H;
      uint16_t* dgr = dg + r * G;
      float* dpr = dp + rows[t * n + r] * G;
#pragma omp simd
      for (int64_t k = 0; k < H; ++k) {
        const float i = gr[k], f = gr[H + k], u = gr[2 * H + k], o = gr[3 * H + k];
        const float tc = tanh_(cr[k]);
        const float d_h = dsr[k] + from_bf16(dhr[k]);
        const float d_cell = d_h * o * (1.f - tc * tc) + dcr[k];
        const float di = d_cell * u * i * (1.f - i);
        const float df = d_cell * cpr[k] * f * (1.f - f);
        const float du = d_cell * i * (1.f - u * u);
        const float d_o = d_h * tc * o * (1.f - o);
        dcr[k] = d_cell * f;
        dgr[k] = to_bf16(di); dgr[H + k] = to_bf16(df); dgr[2 * H + k] = to_bf16(du); dgr[3 * H + k] = to_bf16(d_o);
        dpr[k] += di; dpr[H + k] += df; dpr[2 * H + k] += du; dpr[3 * H + k] += d_o;
      }
    }
    if (t > 0) {  // rows past a have zero gate gradients: their d_h stays zero
      const int64_t m = std::min(n, round_up(a, 32));
      at::Tensor out = d_h16.narrow(0, 0, m);
      at::mm_out(out, d_gates_t.narrow(0, 0, m), w_hh16);
    }
  }
  // d_w_hh = sum over t >= 1 of d_gates[t]^T h[t - 1]: one matmul over all steps (zero rows pad it)
  const at::Tensor d_w_hh =
      T > 1 ? at::mm(d_gates16_rows.narrow(0, n, K).t(), states16_rows.narrow(0, 0, K)).to(at::kFloat)
            : at::zeros({G, H}, f32);
  const at::Tensor d_bias = d_P.sum(0);
  const at::Tensor d_P16 = d_P.to(at::kBFloat16);
  const at::Tensor d_w_ih = at::mm(d_P16.t(), x16).to(at::kFloat);
  const at::Tensor d_x = at::mm(d_P16, w_ih16).narrow(0, 0, U).to(at::kFloat);
  return {d_x, d_w_ih, d_w_hh, d_bias};
}

// Adam on the rows of p that appear in a sparse gradient (rows distinct, g their gradient rows),
// with the optimiser's step count for the bias corrections, as siamese.optim.LazyAdam.
void lazy_adam(at::Tensor& p, at::Tensor& m, at::Tensor& v, const at::Tensor& rows, const at::Tensor& g, double lr,
               double beta1, double beta2, double eps, int64_t step) {
  check_cpu(p, "p", at::kFloat, 2);
  check_cpu(m, "m", at::kFloat, 2);
  check_cpu(v, "v", at::kFloat, 2);
  check_cpu(rows, "rows", at::kLong, 1);
  check_cpu(g, "g", at::kFloat, 2);
  TORCH_CHECK(m.sizes() == p.sizes() && v.sizes() == p.sizes(), "m and v must have p's shape");
  TORCH_CHECK(g.size(0) == rows.size(0) && g.size(1) == p.size(1), "g must hold one row of p's width per row index");
  TORCH_CHECK(rows.numel() == 0 || (rows.min().item<int64_t>() >= 0 && rows.max().item<int64_t>() < p.size(0)),
              "rows must index rows of p");
  TORCH_CHECK(step >= 1, "step must be >= 1");
  const int64_t R = rows.size(0), D = p.size(1);
  const float b1 = beta1, b2 = beta2, e = eps;
  const float step_size = lr / (1.0 - std::pow(beta1, step));
  const float inv_correction2 = 1.0 / std::sqrt(1.0 - std::pow(beta2, step));
  float* pp = p.data_ptr<float>();
  float* mp = m.data_ptr<float>();
  float* vp = v.data_ptr<float>();
  const float* gp = g.data_ptr<float>();
  const int64_t* rp = rows.data_ptr<int64_t>();
  for (int64_t r = 0; r < R; ++r) {
    float* pr = pp + rp[r] * D;
    float* mr = mp + rp[r] * D;
    float* vr = vp + rp[r] * D;
    const float* gr = gp + r * D;
#pragma omp simd
    for (int64_t k = 0; k < D; ++k) {
      const float mk = b1 * mr[k] + (1.f - b1) * gr[k];
      const float vk = b2 * vr[k] + (1.f - b2) * gr[k] * gr[k];
      mr[k] = mk;
      vr[k] = vk;
      pr[k] -= step_size * mk / (std::sqrt(vk) * inv_correction2 + e);
    }
  }
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  const auto no_gil = py::call_guard<py::gil_scoped_release>();
  m.def("lstm_forward", &lstm_forward, no_gil);
  m.def("lstm_backward", &lstm_backward, no_gil);
  m.def("lazy_adam_", &lazy_adam, no_gil);
}
