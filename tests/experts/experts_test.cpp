// The runtime experts' pieces, each against values computed by hand from the definitions
// (OCP MX v1.0, vLLM's routing and activation code at the reference).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "lib/core/error.h"
#include "lib/experts/dequant.h"
#include "lib/experts/moe.h"
#include "lib/experts/routing.h"
#include "lib/experts/seeded.h"

namespace moepack::experts {
namespace {

OwnedTensor u8(std::vector<uint64_t> shape, std::vector<uint8_t> bytes) {
  OwnedTensor t(DType::U8, std::move(shape));
  t.bytes = std::move(bytes);
  return t;
}

TEST(Dequant, Mxfp4WorkedExample) {
  // One row of 32 FP4 codes: byte j holds codes 2j (low nibble) and 2j+1 (high nibble).
  // Codes 0x1 (0.5), 0xA (-1.0) ... scale 128 = 2^1.
  std::vector<uint8_t> w(16, 0);
  w[0] = 0xA1;  // c0 = 0x1 -> 0.5, c1 = 0xA -> -1.0
  w[15] = 0x7F;  // c30 = 0xF -> -6, c31 = 0x7 -> 6
  OwnedTensor weight = u8({1, 16}, w), scale = u8({1, 1}, {128});
  std::vector<float> v = dequantize(WeightFormat::mxfp4, weight, &scale, 1, 32);
  ASSERT_EQ(v.size(), 32u);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], -2.0f);
  EXPECT_EQ(v[2], 0.0f);
  EXPECT_EQ(v[30], -12.0f);
  EXPECT_EQ(v[31], 12.0f);
}

TEST(Dequant, Mxfp6BitStreamAndBothElementTypes) {
  // Codes 1, 2, 3, 63 in a 24-bit little-endian group: bits 0-5, 6-11, 12-17, 18-23.
  uint32_t word = 1u | (2u << 6) | (3u << 12) | (63u << 18);
  std::vector<uint8_t> row(24, 0);
  row[0] = static_cast<uint8_t>(word), row[1] = static_cast<uint8_t>(word >> 8), row[2] = static_cast<uint8_t>(word >> 16);
  OwnedTensor weight = u8({1, 24}, row), scale = u8({1, 1}, {127});
  std::vector<float> e3m2 = dequantize(WeightFormat::mxfp6_e3m2, weight, &scale, 1, 32);
  // E3M2 subnormals are m · 2^-4; 63 = sign | exponent 7 | mantissa 3 = -(1.75 · 2^4) = -28.
  EXPECT_EQ(e3m2[0], 0.0625f);
  EXPECT_EQ(e3m2[1], 0.125f);
  EXPECT_EQ(e3m2[2], 0.1875f);
  EXPECT_EQ(e3m2[3], -28.0f);
  std::vector<float> e2m3 = dequantize(WeightFormat::mxfp6_e2m3, weight, &scale, 1, 32);
  // E2M3 subnormals are m · 2^-3; 63 = -(1.875 · 2^2) = -7.5.
  EXPECT_EQ(e2m3[0], 0.125f);
  EXPECT_EQ(e2m3[3], -7.5f);
}

TEST(Dequant, Nvfp4TwoLevelAndFloats) {
  OwnedTensor weight = u8({1, 8}, {0x22, 0, 0, 0, 0, 0, 0, 0});  // codes 2 (1.0), 2
  OwnedTensor scale(DType::F8_E4M3, {1, 1});
  scale.bytes = {0x40};  // E4M3 0x40 = 2.0
  std::vector<float> v = dequantize(WeightFormat::nvfp4, weight, &scale, 1, 16, 0.5f);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], 1.0f);
  OwnedTensor bf(DType::BF16, {2});
  bf.bytes = {0x80, 0x3F, 0x00, 0xC0};  // 1.0, -2.0
  EXPECT_EQ(float_values(bf), (std::vector<float>{1.0f, -2.0f}));
}

TEST(Dequant, WrongSizesAreBadInput) {
  OwnedTensor weight = u8({1, 15}, std::vector<uint8_t>(15)), scale = u8({1, 1}, {127});
  EXPECT_THROW(dequantize(WeightFormat::mxfp4, weight, &scale, 1, 32), Error);
  EXPECT_THROW(dequantize(WeightFormat::mxfp4, u8({1, 16}, std::vector<uint8_t>(16)), nullptr, 1, 32), Error);
  EXPECT_EQ(weight_format_of("mxfp4", "kMxfp4Static"), WeightFormat::mxfp4);
  EXPECT_EQ(weight_format_of("wna16", "kInt4Static"), WeightFormat::int_wna16);
  EXPECT_EQ(weight_format_of("fp8", "kFp8StaticTensorSym"), WeightFormat::fp8_e4m3);
  EXPECT_EQ(weight_format_of("int8", "kInt8StaticChannelSym"), WeightFormat::int8);
  EXPECT_EQ(weight_format_of("w4a8", "kInt4Static"), WeightFormat::w4a8_fp8);
  EXPECT_EQ(weight_format_of("w4a8_int8", "kInt4W4A8StaticGroup128Sym"), std::nullopt);  // KleidiAI's pack: not run
}

TEST(Routing, SoftmaxFamilies) {
  // One token, 4 experts: logits 1, 3, 2, 0.
  std::vector<float> logits = {1, 3, 2, 0};
  RoutingSpec s;
  s.top_k = 2;
  s.method = "RenormalizeNaive";
  Routing r = route(logits, 1, 4, s);
  EXPECT_EQ(r.ids, (std::vector<uint32_t>{1, 2}));
  const double e = std::exp(1.0);
  EXPECT_NEAR(r.weights[0], e / (e + 1), 1e-6);
  EXPECT_NEAR(r.weights[1], 1 / (e + 1), 1e-6);
  s.method = "Renormalize";  // softmax over the two chosen logits: the same numbers
  Routing rn = route(logits, 1, 4, s);
  EXPECT_NEAR(rn.weights[0], r.weights[0], 1e-6);
  s.method = "Default";  // no renormalization: softmax over all four
  Routing d = route(logits, 1, 4, s);
  const double z = std::exp(1.0) + std::exp(3.0) + std::exp(2.0) + 1.0;
  EXPECT_NEAR(d.weights[0], std::exp(3.0) / z, 1e-6);
  s.method = "Llama4";
  Routing l = route(logits, 1, 4, s);
  EXPECT_EQ(l.top_k, 1u);
  EXPECT_EQ(l.ids[0], 1u);
  EXPECT_NEAR(l.weights[0], 1 / (1 + std::exp(-3.0)), 1e-6);
}

TEST(Routing, DeepSeekV3GroupsAndCorrectionBias) {
  // 8 experts in 4 groups of 2; keep 2 groups, top-2 experts. The bias moves the choice but not
  // the weights.
  std::vector<float> logits = {0, 0, 4, -4, 1, 1, -2, 3};
  RoutingSpec s;
  s.method = "DeepSeekV3";
  s.top_k = 2;
  s.n_group = 4;
  s.topk_group = 2;
  s.renormalize = true;
  s.routed_scaling_factor = 2.5;
  s.correction_bias = {0, 0, 0, 0, 0, 0, 0, 0};
  auto sig = [](double x) { return 1 / (1 + std::exp(-x)); };
  // Group scores (sum of the top two): g0 1.0, g1 sig(4)+sig(-4) = 1.0, g2 2 sig(1) = 1.46, g3 sig(-2)+sig(3) = 1.07.
  // Kept groups g2 and g3; top-2 inside: expert 7 (sig 3) and expert 4 (sig 1, lower id on the tie).
  Routing r = route(logits, 1, 8, s);
  EXPECT_EQ(r.ids, (std::vector<uint32_t>{7, 4}));
  EXPECT_NEAR(r.weights[0], 2.5 * sig(3) / (sig(3) + sig(1)), 1e-6);
  // A bias of 1 on expert 2 lifts group 1 to 2.0: groups 1 and 2 are kept, group 3 (and expert
  // 7) drops out; experts 2 and 4 are chosen.
  s.correction_bias[2] = 1.0f;
  Routing b = route(logits, 1, 8, s);
  EXPECT_EQ(b.ids, (std::vector<uint32_t>{2, 4}));
  EXPECT_NEAR(b.weights[0], 2.5 * sig(4) / (sig(4) + sig(1)), 1e-6) << "weights come from the unbiased scores";
}

// DeepSeek-V4's hash layers: the experts are the tid2eid row of each token id, weighted by their
// sqrt(softplus) scores (no correction bias), renormalized and scaled (_torch_topk_softplus_sqrt
// with a hash_indices_table).
TEST(Routing, DeepseekV4HashLayersRouteByTokenId) {
  const std::vector<float> logits = {0, 1, -1, 2,    // token 0
                                     3, 0, 0, -2};  // token 1
  RoutingSpec s;
  s.method = "DeepseekV4";
  s.top_k = 2;
  s.routed_scaling_factor = 1.5;
  s.correction_bias = {100, 100, 100, 100};  // ignored by hash layers (vLLM allocates none there)
  s.hash_table = {2, 0,   // token id 0
                  3, 1,   // token id 1
                  1, 2};  // token id 2
  const std::vector<int64_t> ids = {2, 0};
  auto sp = [](double x) { return std::sqrt(std::log1p(std::exp(x))); };
  Routing r = route(logits, 2, 4, s, &ids);
  EXPECT_EQ(r.ids, (std::vector<uint32_t>{1, 2, 2, 0}));
  EXPECT_NEAR(r.weights[0], 1.5 * sp(1) / (sp(1) + sp(-1)), 1e-6);
  EXPECT_NEAR(r.weights[1], 1.5 * sp(-1) / (sp(1) + sp(-1)), 1e-6);
  EXPECT_NEAR(r.weights[2], 1.5 * sp(0) / (sp(0) + sp(3)), 1e-6);
  EXPECT_NEAR(r.weights[3], 1.5 * sp(3) / (sp(0) + sp(3)), 1e-6);
  // Without token ids, with an id outside the table, or a table naming no expert: bad input.
  EXPECT_THROW(route(logits, 2, 4, s), Error);
  const std::vector<int64_t> outside = {3, 0};
  EXPECT_THROW(route(logits, 2, 4, s, &outside), Error);
  s.hash_table[0] = 4;
  EXPECT_THROW(route(logits, 2, 4, s, &ids), Error);
  s.hash_table[0] = 2;
  s.method = "DeepSeekV3";  // tables route sqrtsoftplus layers only
  EXPECT_THROW(route(logits, 2, 4, s, &ids), Error);
}

TEST(Routing, ParametersThatCannotRouteAreBadInput) {
  RoutingSpec s;
  s.top_k = 5;
  EXPECT_THROW(route(std::vector<float>(4), 1, 4, s), Error);
  s.top_k = 1;
  s.method = "Hash";
  EXPECT_THROW(route(std::vector<float>(4), 1, 4, s), Error);
}

ActivationSpec act(const std::string& name) {
  ActivationSpec a;
  a.name = name;
  return a;
}

// One expert, one token, hidden 2, intermediate 1: small enough to compute by hand.
double run_one(const ActivationSpec& act, W13Rows rows, std::vector<float> w13, std::vector<float> w13_bias = {}) {
  Routing r;
  r.tokens = 1;
  r.top_k = 1;
  r.ids = {0};
  r.weights = {0.5f};
  const bool gated = is_gated_activation(act.name);
  MoeShape shape{2, 1, gated, rows};
  ExpertSource src = [&](uint64_t) -> std::optional<ExpertMatrices> {
    ExpertMatrices m;
    m.w13 = w13;
    m.w13_bias = w13_bias;
    m.w2 = {1, -1};
    return m;
  };
  std::vector<double> out(2, 0.0);
  accumulate_experts({1.0f, 2.0f}, 1, r, src, shape, act, out);
  EXPECT_DOUBLE_EQ(out[1], -out[0]);
  return out[0];
}

TEST(Moe, ActivationsAndRowOrders) {
  // x = (1, 2); gate row (1, 1) -> 3, up row (2, 0) -> 2.
  const std::vector<float> halves = {1, 1, 2, 0};
  const double silu3 = 3 / (1 + std::exp(-3.0));
  EXPECT_NEAR(run_one(act("silu"), W13Rows::gate_up_halves, halves), 0.5 * silu3 * 2, 1e-12);
  EXPECT_NEAR(run_one(act("silu"), W13Rows::up_gate_halves, {2, 0, 1, 1}), 0.5 * silu3 * 2, 1e-12);
  EXPECT_NEAR(run_one(act("silu"), W13Rows::interleaved, halves), 0.5 * silu3 * 2, 1e-12) << "one intermediate column: pairs and halves agree";
  // swigluoai with limit 2.5: gate clamped to 2.5, up 2 -> (2 + 1) · 2.5 · sigmoid(1.702 · 2.5).
  ActivationSpec oai = act("swigluoai");
  oai.swiglu_limit = 2.5;
  EXPECT_NEAR(run_one(oai, W13Rows::interleaved, halves), 0.5 * 3 * 2.5 / (1 + std::exp(-1.702 * 2.5)), 1e-12);
  // Biases are added before the activation.
  EXPECT_NEAR(run_one(act("silu"), W13Rows::gate_up_halves, halves, {-3, 1}), 0.0, 1e-12);
  // Not gated: relu2 of the single row (1, 1) -> 3 -> 9.
  EXPECT_NEAR(run_one(act("relu2_no_mul"), W13Rows::gate_up_halves, {1, 1}), 0.5 * 9, 1e-12);
  EXPECT_THROW(run_one(act("situ"), W13Rows::gate_up_halves, halves), Error);
}

// The definition accumulate_experts must equal bit for bit: experts in ascending id, each row's
// dot product summed in ascending order in double, one (token, slot) at a time.
std::vector<double> row_by_row(const std::vector<float>& x, uint64_t T, const Routing& routing, const std::map<uint32_t, ExpertMatrices>& experts,
                               const MoeShape& shape, const ActivationSpec& activation) {
  const ResolvedActivation act = resolve_activation(activation);
  const uint64_t H = shape.hidden, P = shape.inter, n13 = shape.gated ? 2 * P : P;
  std::vector<double> out(T * H, 0.0), h(n13), a(P);
  std::set<uint32_t> routed(routing.ids.begin(), routing.ids.end());
  for (uint32_t e : routed) {
    const ExpertMatrices& m = experts.at(e);
    for (uint64_t t = 0; t < T; ++t)
      for (uint64_t j = 0; j < routing.top_k; ++j) {
        if (routing.ids[t * routing.top_k + j] != e) continue;
        for (uint64_t r = 0; r < n13; ++r) {
          double acc = m.w13_bias.empty() ? 0.0 : m.w13_bias[r];
          for (uint64_t k = 0; k < H; ++k) acc += static_cast<double>(m.w13[r * H + k]) * x[t * H + k];
          h[r] = acc;
        }
        for (uint64_t i = 0; i < P; ++i) {
          const auto [g, u] = shape.gated ? gate_and_up(h.data(), i, P, shape.rows) : std::pair<double, double>{h[i], 0.0};
          a[i] = activation_value(act, g, u);
        }
        for (uint64_t r = 0; r < H; ++r) {
          double acc = m.w2_bias.empty() ? 0.0 : m.w2_bias[r];
          for (uint64_t i = 0; i < P; ++i) acc += static_cast<double>(m.w2[r * P + i]) * a[i];
          out[t * H + r] += routing.weights[t * routing.top_k + j] * acc;
        }
      }
  }
  return out;
}

// Odd sizes (rows not a multiple of the 8-row blocks, experts with more tokens than a token
// group holds), biases, and thread counts from 1 to more than there are experts.
TEST(Moe, SameBitsAsTheRowByRowDefinitionForAnyThreadCount) {
  const uint64_t H = 37, P = 21, E = 6, T = 11, K = 3;
  const MoeShape shape{H, P, true, W13Rows::interleaved};
  std::map<uint32_t, ExpertMatrices> experts;
  for (uint32_t e = 0; e < E; ++e) {
    ExpertMatrices m;
    m.w13 = seeded_normal(100 + e, 2 * P * H);
    m.w2 = seeded_normal(200 + e, H * P);
    if (e % 2) m.w13_bias = seeded_normal(300 + e, 2 * P);
    if (e % 3) m.w2_bias = seeded_normal(400 + e, H);
    experts.emplace(e, std::move(m));
  }
  Routing r;
  r.tokens = T;
  r.top_k = K;
  for (uint64_t t = 0; t < T; ++t)
    for (uint64_t j = 0; j < K; ++j) {
      r.ids.push_back(static_cast<uint32_t>((t * 2 + j * (j + 1)) % E));  // expert 0 gets 6 tokens, distinct per token
      r.weights.push_back(0.25f + 0.125f * static_cast<float>(j));
    }
  const std::vector<float> x = seeded_normal(7, T * H);
  ActivationSpec oai = act("swigluoai");
  oai.swiglu_limit = 7.0;
  const std::vector<double> want = row_by_row(x, T, r, experts, shape, oai);
  ExpertSource source = [&](uint64_t e) -> std::optional<ExpertMatrices> { return experts.at(static_cast<uint32_t>(e)); };
  for (int threads : {1, 2, 3, 16}) {
    std::vector<double> out(T * H, 0.0);
    accumulate_experts(x, T, r, source, shape, oai, out, threads);
    for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], want[i]) << "threads " << threads << ", output " << i;
  }
  // A wrong-sized expert is reported as the lowest such expert, whatever the thread count.
  ExpertSource broken = [&](uint64_t e) -> std::optional<ExpertMatrices> {
    ExpertMatrices m = experts.at(static_cast<uint32_t>(e));
    if (e >= 2) m.w2.pop_back();
    return m;
  };
  for (int threads : {1, 4}) {
    std::vector<double> out(T * H, 0.0);
    try {
      accumulate_experts(x, T, r, broken, shape, oai, out, threads);
      FAIL() << "threads " << threads;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("expert 2:", 0), 0u) << e.what();
    }
  }
}

// Decoding by rows, whole or column-interleaved (the SIMD path for 8 FP4 rows and its scalar
// tail), gives exactly dequantize's values: every code and scale byte, NaN scales included,
// compared as bits.
TEST(Dequant, RowDecodersGiveDequantizesBits) {
  for (WeightFormat f : {WeightFormat::mxfp4, WeightFormat::nvfp4, WeightFormat::mxfp8, WeightFormat::mxfp6_e2m3}) {
    const FormatInfo& info = format_info(f);
    for (uint64_t cols : {info.block * 3, info.block * 5, info.block * 8}) {
      const uint64_t rows = 19, row_bytes = cols / info.elements_per_group * info.bytes_per_group;
      OwnedTensor w(DType::U8, {rows, row_bytes}), sc(DType::U8, {rows, cols / info.block});
      for (size_t i = 0; i < w.bytes.size(); ++i) w.bytes[i] = static_cast<uint8_t>(i * 37 + i / 7);
      for (size_t i = 0; i < sc.bytes.size(); ++i) sc.bytes[i] = static_cast<uint8_t>(i * 53 + 101);
      const std::vector<float> whole = dequantize(f, w, &sc, rows, cols, 0.75f);
      const RowDequantizer by_rows(f, w, sc, rows, cols, 0.75f);
      std::vector<float> block(8 * cols), interleaved(8 * cols);
      for (uint64_t r0 : {uint64_t{0}, uint64_t{3}, uint64_t{11}}) {
        by_rows.decode(r0, 8, block.data());
        by_rows.decode_interleaved(r0, 8, interleaved.data());
        for (uint64_t i = 0; i < 8; ++i)
          for (uint64_t k = 0; k < cols; ++k) {
            const float want = whole[(r0 + i) * cols + k];
            ASSERT_EQ(std::memcmp(&block[i * cols + k], &want, 4), 0) << format_info(f).name << " cols " << cols << " row " << r0 + i << " col " << k;
            ASSERT_EQ(std::memcmp(&interleaved[k * 8 + i], &want, 4), 0) << format_info(f).name << " cols " << cols << " row " << r0 + i << " col " << k;
          }
      }
    }
  }
}

// Experts given as row decoders (what the emulation and the reference hand over for MX, NVFP4
// and float weights) compute the same bits as the same weights given whole in float.
TEST(Moe, RowDecodedExpertsGiveTheBitsOfWholeFloatMatrices) {
  const uint64_t H = 96, P = 64, E = 5, T = 7, K = 2;
  const MoeShape shape{H, P, true, W13Rows::gate_up_halves};
  auto codes = [](uint64_t rows, uint64_t cols, uint64_t seed) {
    OwnedTensor w(DType::U8, {rows, cols / 2}), s(DType::U8, {rows, cols / 32});
    for (size_t i = 0; i < w.bytes.size(); ++i) w.bytes[i] = static_cast<uint8_t>((i * 131 + seed * 17) >> 1);
    for (size_t i = 0; i < s.bytes.size(); ++i) s.bytes[i] = static_cast<uint8_t>(120 + (i * 7 + seed) % 12);
    return std::pair{w, s};
  };
  std::map<uint32_t, ExpertMatrices> dense, decoded;
  for (uint32_t e = 0; e < E; ++e) {
    auto [w13, s13] = codes(2 * P, H, e);
    auto [w2, s2] = codes(H, P, 100 + e);
    ExpertMatrices d, r;
    d.w13 = dequantize(WeightFormat::mxfp4, w13, &s13, 2 * P, H);
    d.w2 = dequantize(WeightFormat::mxfp4, w2, &s2, H, P);
    r.w13_rows = std::make_shared<const RowDequantizer>(WeightFormat::mxfp4, w13, s13, 2 * P, H);
    r.w2_rows = std::make_shared<const RowDequantizer>(WeightFormat::mxfp4, w2, s2, H, P);
    d.w2_bias = r.w2_bias = seeded_normal(500 + e, H);
    dense.emplace(e, std::move(d));
    decoded.emplace(e, std::move(r));
  }
  Routing r;
  r.tokens = T;
  r.top_k = K;
  for (uint64_t t = 0; t < T; ++t)
    for (uint64_t j = 0; j < K; ++j) {
      r.ids.push_back(static_cast<uint32_t>((t + 2 * j) % E));
      r.weights.push_back(0.5f);
    }
  const std::vector<float> x = seeded_normal(9, T * H);
  std::vector<double> want(T * H, 0.0);
  accumulate_experts(x, T, r, [&](uint64_t e) -> std::optional<ExpertMatrices> { return dense.at(static_cast<uint32_t>(e)); }, shape, act("silu"), want);
  for (int threads : {1, 3}) {
    std::vector<double> out(T * H, 0.0);
    accumulate_experts(x, T, r, [&](uint64_t e) -> std::optional<ExpertMatrices> { return decoded.at(static_cast<uint32_t>(e)); }, shape, act("silu"), out, threads);
    for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], want[i]) << "threads " << threads << ", output " << i;
  }
}

}  // namespace
}  // namespace moepack::experts
