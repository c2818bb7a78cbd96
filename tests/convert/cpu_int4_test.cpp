// vLLM's CPU INT4 W4A16 preparation (lib/convert/cpu_int4.h with packers/cpu_sgl_int4.h) against
// convert_weight_packed_scale_zp written out as upstream's loops, on several experts at once,
// several scale groups, several 32-output blocks, groups wider and narrower than block_k, and
// each way of unpacking zero points; then the refusals of layers vLLM loads wrongly.
#include "lib/convert/cpu_int4.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "formats/artifact/manifest.h"
#include "lib/convert/executor.h"
#include "lib/convert/plan.h"
#include "lib/convert/target.h"
#include "lib/core/codecs.h"
#include "lib/core/error.h"
#include "packers/registry.h"
#include "support/artifacts.h"
#include "support/test_support.h"

namespace moepack::convert {
namespace {

enum class Algo { awq, gptq };

struct OpResult {
  std::vector<uint8_t> weight;  // [E, Nc, Kc, block_k*16 + 128]
  std::vector<int8_t> zeros;    // [E, Nc, G, 32]
  std::vector<float> scales;    // [E, Nc, G, 32]
};

// csrc/cpu/sgl-kernels/gemm_int4.cpp @ e9d1398d9, convert_weight_packed_scale_zp on 3-D inputs,
// step by step: int4pack (AWQ shifts / unpack_4bit_to_32bit_signed), the transposes, then per
// expert convert_int4_weight_packed_with_compensation with its VNNI-4 loop as written there.
// qweight: AWQ [E, K, N/8] or GPTQ [E, K/8, N]; qzeros [E, G, N/8]; scales [E, G, N].
OpResult upstream_op(const std::vector<int32_t>& qweight, const std::vector<int32_t>& qzeros, const std::vector<float>& scales, uint64_t E, uint64_t K,
                     uint64_t N, uint64_t G, Algo algo) {
  // int4pack -> W [E][N][K] (uint8), Z [E][G][N] (int8)
  std::vector<uint8_t> W(E * N * K);
  std::vector<int8_t> Zg(E * G * N);
  if (algo == Algo::awq) {
    const int shifts[8] = {0, 16, 4, 20, 8, 24, 12, 28};  // {0, 4, 1, 5, 2, 6, 3, 7} * 4
    for (uint64_t e = 0; e < E; ++e) {
      for (uint64_t k = 0; k < K; ++k)
        for (uint64_t w = 0; w < N / 8; ++w)
          for (uint64_t j = 0; j < 8; ++j)  // unpacked [..., K, N/8, 8] flattened then transposed
            W[(e * N + 8 * w + j) * K + k] = static_cast<uint8_t>((qweight[(e * K + k) * (N / 8) + w] >> shifts[j]) & 0xF);
      for (uint64_t g = 0; g < G; ++g)
        for (uint64_t w = 0; w < N / 8; ++w)
          for (uint64_t j = 0; j < 8; ++j) Zg[(e * G + g) * N + 8 * w + j] = static_cast<int8_t>((qzeros[(e * G + g) * (N / 8) + w] >> shifts[j]) & 0xF);
    }
  } else {
    const uint64_t W0 = K / 8, W1 = N, Z0 = G, Z1 = N / 8;
    for (uint64_t e = 0; e < E; ++e) {
      std::vector<int8_t> uw(W0 * 8 * W1), uz(Z0 * Z1 * 8);
      for (uint64_t row = 0; row < W0 * 8; ++row) {
        const int i = static_cast<int>(row & 7);
        const uint64_t src_row = row >> 3;
        for (uint64_t col = 0; col < W1; ++col) uw[row * W1 + col] = static_cast<int8_t>((qweight[e * W0 * W1 + src_row * W1 + col] >> (4 * i)) & 0xF);
      }
      for (uint64_t col = 0; col < Z1 * 8; ++col) {
        const int i = static_cast<int>(col & 7);
        for (uint64_t row = 0; row < Z0; ++row) uz[row * (Z1 * 8) + col] = static_cast<int8_t>((qzeros[e * Z0 * Z1 + row * Z1 + (col >> 3)] >> (4 * i)) & 0xF);
      }
      for (uint64_t k = 0; k < K; ++k)
        for (uint64_t n = 0; n < N; ++n) W[(e * N + n) * K + k] = static_cast<uint8_t>(uw[k * N + n]);  // transpose(0, 1)
      for (uint64_t x = 0; x < G * N; ++x) Zg[e * G * N + x] = static_cast<int8_t>(uz[x] + 1);          // unpacked_zeros + 1
    }
  }
  const uint64_t group_size = K / G, block_k = std::min<uint64_t>(group_size, 128), block_n = 32, Nc = N / block_n, Kc = K / block_k;
  const uint64_t row_bytes = block_k * block_n / 2 + block_n * 4;
  OpResult r;
  r.weight.assign(E * Nc * Kc * row_bytes, 0);
  r.zeros.assign(E * Nc * G * block_n, 0);
  r.scales.assign(E * Nc * G * block_n, 0);
  for (uint64_t e = 0; e < E; ++e) {
    // _qzeros / _scales .transpose(-2, -1): [N][G]; blocked: view {Nc, 32, G}.permute(0, 2, 1)
    for (uint64_t nc = 0; nc < Nc; ++nc)
      for (uint64_t g = 0; g < G; ++g)
        for (uint64_t j = 0; j < block_n; ++j) {
          const uint64_t n = nc * block_n + j, out = ((e * Nc + nc) * G + g) * block_n + j;
          r.zeros[out] = Zg[(e * G + g) * N + n];
          r.scales[out] = scales[(e * G + g) * N + n];
        }
    // weight.view({Nc, block_n, Kc, block_k}).permute({0, 2, 3, 1}): [Nc][Kc][block_k][block_n]
    std::vector<uint8_t> reordered(Nc * Kc * block_k * block_n);
    for (uint64_t nc = 0; nc < Nc; ++nc)
      for (uint64_t kc = 0; kc < Kc; ++kc)
        for (uint64_t kk = 0; kk < block_k; ++kk)
          for (uint64_t j = 0; j < block_n; ++j)
            reordered[((nc * Kc + kc) * block_k + kk) * block_n + j] = W[(e * N + nc * block_n + j) * K + kc * block_k + kk];
    // compensation: (weight.view({Nc, block_n, G, -1}) - qzeros.view({Nc, block_n, G, -1})) summed per block_k
    std::vector<int32_t> comp(Nc * Kc * block_n, 0);
    for (uint64_t nc = 0; nc < Nc; ++nc)
      for (uint64_t j = 0; j < block_n; ++j)
        for (uint64_t k = 0; k < K; ++k) {
          const uint64_t n = nc * block_n + j;
          comp[(nc * Kc + k / block_k) * block_n + j] += static_cast<int32_t>(W[(e * N + n) * K + k]) - Zg[(e * G + k / group_size) * N + n];
        }
    uint8_t* blocked = r.weight.data() + e * Nc * Kc * row_bytes;
    for (uint64_t i = 0; i < Nc * Kc; ++i) {
      const uint8_t* in_ptr = reordered.data() + i * block_k * block_n;
      uint8_t* out_ptr = blocked + i * block_n * (block_k / 2 + 4);
      constexpr int n_group_size = 8, vnni_size = 4, n_group = 32 / n_group_size;
      for (int nb = 0; nb < n_group; nb += 2)
        for (int k = 0; k < static_cast<int>(block_k); k += vnni_size)
          for (int ni = 0; ni < n_group_size; ++ni)
            for (int ki = 0; ki < vnni_size; ++ki) {
              const int src_idx_1 = nb * n_group_size + ni + (k + ki) * static_cast<int>(block_n);
              const int src_idx_2 = (nb + 1) * n_group_size + ni + (k + ki) * static_cast<int>(block_n);
              const int dst_idx = (nb / 2 * n_group_size + ni) * vnni_size + k * static_cast<int>(block_n) / 2 + ki;
              out_ptr[dst_idx] = static_cast<uint8_t>((in_ptr[src_idx_1] & 0x0f) | ((in_ptr[src_idx_2] & 0x0f) << 4));
            }
      std::memcpy(out_ptr + block_k * block_n / 2, comp.data() + i * block_n, block_n * 4);
    }
  }
  return r;
}

uint32_t mix(uint64_t i, uint64_t seed) { return static_cast<uint32_t>(((i + 1) * 2654435761u) ^ (seed * 40503u) ^ ((i * 97 + seed) >> 3)) * 2246822519u; }

std::vector<uint8_t> pack_all(const packers::Layout& layout, const OwnedTensor& canonical) {
  std::vector<uint8_t> out(byte_size(layout.packed_dtype(canonical.dtype), layout.packed_shape(canonical.shape)));
  layout.pack(canonical.view(), out);
  return out;
}

// One expert's slice [e] of an [E, ...] int32 tensor as a 2-D canonical param.
OwnedTensor expert_i32(const std::vector<int32_t>& all, uint64_t e, uint64_t rows, uint64_t cols) {
  OwnedTensor t(DType::I32, {rows, cols});
  std::memcpy(t.bytes.data(), all.data() + e * rows * cols, rows * cols * 4);
  return t;
}

struct Case {
  Algo algo;
  std::string zeros;  // qzeros_plus_1, awq_qzeros, synthetic_0x77777777
  uint64_t E, K, N, group_size;
};

class CpuInt4AgainstUpstream : public ::testing::TestWithParam<Case> {};

TEST_P(CpuInt4AgainstUpstream, DerivationsAndPackersGiveTheOpsBytes) {
  const Case c = GetParam();
  const uint64_t E = c.E, K = c.K, N = c.N, G = K / c.group_size, block_k = std::min<uint64_t>(c.group_size, 128);
  SCOPED_TRACE(c.zeros + " K " + std::to_string(K) + " N " + std::to_string(N) + " G " + std::to_string(G));
  const bool awq = c.algo == Algo::awq, synthetic = c.zeros == "synthetic_0x77777777";
  const uint64_t wrows = awq ? K : K / 8, wcols = awq ? N / 8 : N;
  std::vector<int32_t> qweight(E * wrows * wcols), qzeros(E * G * (N / 8));
  for (uint64_t i = 0; i < qweight.size(); ++i) qweight[i] = static_cast<int32_t>(mix(i, 1));
  for (uint64_t i = 0; i < qzeros.size(); ++i) qzeros[i] = synthetic ? 0x77777777 : static_cast<int32_t>(mix(i, 2));  // every nibble 0..15
  std::vector<float> scales(E * G * N);
  std::vector<uint16_t> scales_bf16(scales.size());
  for (uint64_t i = 0; i < scales.size(); ++i) {
    scales_bf16[i] = float_to_bf16(static_cast<float>(static_cast<int>(mix(i, 3) % 2001) - 1000) / 4096.0f);
    scales[i] = bf16_to_float(scales_bf16[i]);
  }
  const OpResult want = upstream_op(qweight, qzeros, scales, E, K, N, G, c.algo);

  ckpt::MoeLayer layer;
  layer.prefix = "model.layers.0.mlp.experts";
  const std::set<std::string> available =
      synthetic ? std::set<std::string>{"w13_qweight", "w13_scales"} : std::set<std::string>{"w13_qweight", "w13_scales", "w13_qzeros"};
  const std::string weight_id = "cpu.sgl_int4_compensation(zeros=" + c.zeros + ",e9d1398d9) | cpu.sgl_int4_weight_packed(" + (awq ? "awq" : "gptq") +
                                ",block_k=" + std::to_string(block_k) + ",e9d1398d9)";
  const std::string zero_id = "cpu.sgl_int4_zero_points(zeros=" + c.zeros + ",e9d1398d9) | cpu.sgl_int4_blocked_zero_points(i8,e9d1398d9)";
  const auto weight = make_cpu_int4_derivation("w13_qweight", weight_id, available, layer);
  const auto zeros = make_cpu_int4_derivation("w13_qzeros", zero_id, available, layer);
  ASSERT_NE(weight, nullptr);
  ASSERT_NE(zeros, nullptr);
  EXPECT_EQ(weight->name(), weight_id);
  EXPECT_EQ(zeros->name(), zero_id);
  EXPECT_EQ(weight->inputs(), (std::vector<std::string>{"w13_qweight", synthetic ? "w13_scales" : "w13_qzeros"}));
  const auto scale_layout = packers::make_layout("cpu.sgl_int4_blocked_scales(f32,e9d1398d9)");

  std::vector<uint8_t> got_w, got_z, got_s;
  const RankGeometry g;
  for (uint64_t e = 0; e < E; ++e) {
    OwnedTensor s(DType::BF16, {G, N});
    std::memcpy(s.bytes.data(), scales_bf16.data() + e * G * N, G * N * 2);
    const OwnedTensor zp = synthetic ? s : expert_i32(qzeros, e, G, N / 8);
    const std::vector<OwnedTensor> win = {expert_i32(qweight, e, wrows, wcols), zp};
    const std::vector<OwnedTensor> zin = {zp};
    EXPECT_EQ(weight->slab_shape(win, g), (std::vector<uint64_t>{N / 32, K / block_k, block_k * 16 + 128}));
    EXPECT_EQ(zeros->slab_shape(zin, g), (std::vector<uint64_t>{N / 32, G, 32}));
    ASSERT_TRUE(zeros->unpacked(zin, g).has_value());
    EXPECT_EQ(zeros->unpacked(zin, g)->shape, (std::vector<uint64_t>{G, N}));
    std::vector<uint8_t> w(byte_size(DType::U8, weight->slab_shape(win, g))), z(byte_size(DType::I8, zeros->slab_shape(zin, g)));
    weight->produce(win, g, w, "expert " + std::to_string(e));
    zeros->produce(zin, g, z, "expert " + std::to_string(e));
    got_w.insert(got_w.end(), w.begin(), w.end());
    got_z.insert(got_z.end(), z.begin(), z.end());
    const std::vector<uint8_t> packed_s = pack_all(*scale_layout, s);
    got_s.insert(got_s.end(), packed_s.begin(), packed_s.end());
    // Read back: the weight through its packer is the loaded param, the zero points the op's int8 values.
    OwnedTensor back(DType::I32, {wrows, wcols});
    packers::make_layout(weight_id.substr(weight_id.find(" | ") + 3))->unpack(w, back);
    EXPECT_EQ(back.bytes, win[0].bytes);
    OwnedTensor zback(DType::I8, {G, N});
    packers::make_layout(zero_id.substr(zero_id.find(" | ") + 3))->unpack(z, zback);
    for (uint64_t gg = 0; gg < G; ++gg)
      for (uint64_t n = 0; n < N; ++n) ASSERT_EQ(static_cast<int8_t>(zback.bytes[gg * N + n]), want.zeros[((e * (N / 32) + n / 32) * G + gg) * 32 + n % 32]);
  }
  EXPECT_EQ(got_w, want.weight);
  std::vector<uint8_t> want_z(want.zeros.size());
  std::memcpy(want_z.data(), want.zeros.data(), want_z.size());
  EXPECT_EQ(got_z, want_z);
  std::vector<uint8_t> want_s(want.scales.size() * 4);
  std::memcpy(want_s.data(), want.scales.data(), want_s.size());
  EXPECT_EQ(got_s, want_s);
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return c.zeros + "_E" + std::to_string(c.E) + "_K" + std::to_string(c.K) + "_N" + std::to_string(c.N) + "_g" + std::to_string(c.group_size);
}

INSTANTIATE_TEST_SUITE_P(Sizes, CpuInt4AgainstUpstream,
                         ::testing::Values(Case{Algo::gptq, "qzeros_plus_1", 3, 96, 96, 32},  // 3 groups = 3 blocks of 32, 3 output blocks
                                           Case{Algo::awq, "awq_qzeros", 3, 96, 96, 32},
                                           Case{Algo::gptq, "synthetic_0x77777777", 2, 192, 64, 64},  // compressed-tensors symmetric
                                           Case{Algo::gptq, "qzeros_plus_1", 2, 512, 64, 256},        // a group spans two 128-input blocks
                                           Case{Algo::awq, "awq_qzeros", 2, 384, 32, 128}, Case{Algo::gptq, "qzeros_plus_1", 2, 64, 160, 16},  // block_k 16
                                           Case{Algo::awq, "awq_qzeros", 1, 128, 32, 128}),  // one group, one block
                         case_name);

// ---- the samples: parameters as vLLM holds them, run with no error at all ----

TEST(CpuInt4Samples, ParametersHaveTheOpsShapesAndRunExactly) {
  struct Sample {
    const char* name;
    const char* weight;
    const char* scale;
    const char* zeros;
  };
  for (const Sample& smp : {Sample{"gptq-int4", "qweight", "scales", "qzeros"}, Sample{"awq-int4", "qweight", "scales", "qzeros"},
                            Sample{"ct-w4a16", "weight_packed", "weight_scale", "weight_zero_point"}}) {
    SCOPED_TRACE(smp.name);
    const std::string src = test::source_dir() + "/samples/" + smp.name;
    ckpt::Checkpoint ck = ckpt::open_checkpoint(src);
    const oracle::Deployment dep = oracle::default_deployment(oracle::parse_target("cpu-amx"));
    auto decisions = decide_layers(ck, dep);
    ConvertRequest req;
    req.target_json = target_json(dep);
    test::TempDir out;
    const artifact::Manifest m = execute_plan(build_conversion_plan(ck, decisions, req), out.path(), ExecutorOptions{});
    ASSERT_EQ(m.layers.size(), 1u);
    const auto& t = m.layers[0].ranks.at(0).tensors;
    // hidden 128, intermediate 128, group 128, 4 experts: w13 N = 256 (8 blocks), w2 N = 128 (4 blocks), one group each.
    const std::string p = "w13_", q = "w2_";
    EXPECT_EQ(t.at(p + smp.weight).dtype, "U8");
    EXPECT_EQ(t.at(p + smp.weight).shape, (std::vector<uint64_t>{4, 8, 1, 128 * 16 + 128}));
    EXPECT_EQ(t.at(q + smp.weight).shape, (std::vector<uint64_t>{4, 4, 1, 128 * 16 + 128}));
    EXPECT_EQ(t.at(p + smp.scale).dtype, "F32");
    EXPECT_EQ(t.at(p + smp.scale).shape, (std::vector<uint64_t>{4, 8, 1, 32}));
    EXPECT_EQ(t.at(p + smp.zeros).dtype, "I8");
    EXPECT_EQ(t.at(q + smp.zeros).shape, (std::vector<uint64_t>{4, 4, 1, 32}));
    EXPECT_EQ(t.at(q + smp.zeros).canonical_shape, (std::vector<uint64_t>{1, 128}));
    EXPECT_FALSE(t.count("w13_g_idx_sort_indices"));  // set to None (or never loaded)
    const runtime::VerifyReport v = test::expect_verified_against_source(out.path(), src, 8);
    ASSERT_EQ(v.layers.size(), 1u);
    EXPECT_EQ(v.layers[0].max_abs_error, 0.0);  // same codes, zero points and scales as the source
  }
}

// ---- layers vLLM loads on this backend but cannot run as the checkpoint means ----

ckpt::MoeLayer gptq_layer(int64_t group_size) {
  ckpt::MoeLayer l;
  l.prefix = "model.layers.0.mlp.experts";
  l.gated = true;
  l.quant.method.quant_method = "auto_gptq";
  l.quant.group_size = group_size;
  l.quant.weight_bits = 4;
  l.quant.checkpoint_format = "gptq";
  return l;
}
oracle::Decision cpu_decision(int hidden, int inter) {
  oracle::Decision d;
  d.family = oracle::Family::wna16;
  d.backend = "CPU";
  d.experts_class = "CPUExpertsInt4";
  d.hidden_size = d.padded_hidden_size = hidden;
  d.intermediate_size = d.padded_intermediate_size = inter;
  return d;
}
void expect_refused_with(const std::optional<std::string>& why, const std::string& part) {
  ASSERT_TRUE(why.has_value()) << "expected a refusal naming: " << part;
  EXPECT_NE(why->find(part), std::string::npos) << *why;
}

TEST(CpuInt4Refusal, LayersTheKernelWouldComputeWronglyOrNotLoad) {
  EXPECT_FALSE(cpu_int4_refusal(gptq_layer(128), cpu_decision(256, 512)).has_value());
  EXPECT_FALSE(cpu_int4_refusal(gptq_layer(256), cpu_decision(512, 256)).has_value());  // block_k 128, two blocks a group
  EXPECT_FALSE(cpu_int4_refusal(gptq_layer(-1), cpu_decision(128, 128)).has_value());   // channel-wise, same K both ways

  ckpt::MoeLayer bias = gptq_layer(128);
  bias.has_bias = true;
  expect_refused_with(cpu_int4_refusal(bias, cpu_decision(256, 256)), "passes no bias");
  ckpt::MoeLayer awq = gptq_layer(128);
  awq.quant.method.quant_method = "auto_awq";
  awq.quant.may_have_zp = false;
  expect_refused_with(cpu_int4_refusal(awq, cpu_decision(256, 256)), "AutoAWQ without zero points");
  awq.quant.may_have_zp = true;
  EXPECT_FALSE(cpu_int4_refusal(awq, cpu_decision(256, 256)).has_value());
  ckpt::MoeLayer dynamic = gptq_layer(128);
  dynamic.quant.method.quant_method = "compressed-tensors";
  dynamic.quant.act_order = true;
  dynamic.quant.actorder = "dynamic";
  expect_refused_with(cpu_int4_refusal(dynamic, cpu_decision(256, 256)), "never reads it");
  ckpt::MoeLayer v2 = gptq_layer(128);
  v2.quant.checkpoint_format = "gptq_v2";
  expect_refused_with(cpu_int4_refusal(v2, cpu_decision(256, 256)), "one too high");
  expect_refused_with(cpu_int4_refusal(gptq_layer(8), cpu_decision(256, 40)), "BLOCK_N = 32");   // w13 N = 80
  expect_refused_with(cpu_int4_refusal(gptq_layer(16), cpu_decision(240, 64)), "BLOCK_N = 32");  // w2 N = hidden 240
  expect_refused_with(cpu_int4_refusal(gptq_layer(128), cpu_decision(192, 256)), "does not divide the hidden size");
  expect_refused_with(cpu_int4_refusal(gptq_layer(-1), cpu_decision(256, 128)), "channel-wise");
  expect_refused_with(cpu_int4_refusal(gptq_layer(192), cpu_decision(384, 384)), "no multiple");
  expect_refused_with(cpu_int4_refusal(gptq_layer(-1), cpu_decision(96, 96)), "block_k 16, 32, 64 and 128 only");
}

}  // namespace
}  // namespace moepack::convert
