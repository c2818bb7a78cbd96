#include "lib/convert/fp8_prepare.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "lib/convert/fp8_deepgemm.h"
#include "lib/core/codecs.h"
#include "lib/core/error.h"
#include "lib/core/layout_ids.h"

namespace moepack::convert {
namespace {

OwnedTensor widened(const OwnedTensor& in) { return cast_float_tensor(in, DType::F32); }

// Rows [begin, begin + count) of a row-major [rows, cols] tensor into `out` at row `at`.
void copy_rows(const OwnedTensor& in, uint64_t begin, uint64_t count, OwnedTensor& out, uint64_t at, const std::string& role) {
  const uint64_t row_bytes = in.bytes.size() / std::max<uint64_t>(1, in.shape[0]);
  copy_param_elements(in, begin, out, at, count, row_bytes, role);
}

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// One expert's [w1, w3] per-tensor scales, checked.
std::pair<float, float> shard_scales(const OwnedTensor& s, const std::string& where) {
  if (s.num_elements() != 2) throw_internal("fp8 per-tensor w13 scale with " + std::to_string(s.num_elements()) + " values");
  const float a = float_element(s, 0), b = float_element(s, 1);
  for (float v : {a, b})
    if (!std::isfinite(v) || v <= 0.0f)
      throw_bad_input(where, "w13_weight_scale", "per-tensor scale " + std::to_string(v) + " is not a positive finite number (vLLM would requantize with it)");
  return {a, b};
}

// The one scale a per-tensor expert's w13 ends with: the larger of its [w1, w3] scales, or the
// scale itself for a non-gated layer (and for w2).
float expert_tensor_scale(const OwnedTensor& s, const std::string& where) {
  if (s.num_elements() == 1) return float_element(s, 0);
  const auto [s1, s3] = shard_scales(s, where);
  return std::max(s1, s3);
}

class W13MaxScale final : public LayerReduction {
 public:
  std::string name() const override { return layout_id::fp8_w13_max_scale(); }
  DType dtype() const override { return DType::F32; }
  std::vector<uint64_t> shape(uint64_t local_experts) const override { return {local_experts}; }
  void reduce(const ReductionInput& in, std::span<uint8_t> out) const override {
    uint64_t i = 0;
    in.each(in.role, false, [&](uint64_t expert, const OwnedTensor& s) {
      const float m = expert_tensor_scale(s, in.where(in.role, expert));
      std::memcpy(out.data() + 4 * i++, &m, 4);
    });
    if (4 * i != out.size()) throw_internal("fp8_w13_max_scale: expert count");
  }
};

// FlashInfer CUTLASS, per-tensor weights: make_fp8_moe_quant_config registers
// g1_alphas = w1_scale * a1_scale and g2_alphas = w2_scale * a2_scale on the layer.
class FiCutlassAlphas final : public LayerReduction {
 public:
  FiCutlassAlphas(int gemm, bool all_experts) : gemm_(gemm), all_experts_(all_experts) {}
  std::string name() const override {
    return layout_id::fp8_fi_cutlass_alphas(gemm_, all_experts_);
  }
  DType dtype() const override { return DType::F32; }
  std::vector<uint64_t> shape(uint64_t local_experts) const override { return {local_experts}; }
  bool reads_other_roles() const override { return true; }
  void reduce(const ReductionInput& in, std::span<uint8_t> out) const override {
    const std::string w = gemm_ == 1 ? "w13" : "w2";
    // The input scale as process_fp8_input_tensor_strategy_moe leaves it: the experts' maximum.
    const float a = max_scalar_over_experts(in, w + "_input_scale", all_experts_);
    uint64_t i = 0;
    in.each(w + "_weight_scale", false, [&](uint64_t expert, const OwnedTensor& s) {
      const float alpha = expert_tensor_scale(s, in.where(w + "_weight_scale", expert)) * a;
      std::memcpy(out.data() + 4 * i++, &alpha, 4);
    });
    if (4 * i != out.size()) throw_internal(name() + ": expert count");
  }

 private:
  int gemm_;
  bool all_experts_;
};

class RequantW13 final : public ValueStage {
 public:
  std::string name() const override { return layout_id::fp8_requant_w13_max_scale(); }
  Prepared prepare(const ReductionInput& in) const override {
    const std::string scale_role = "w13_weight_scale";
    std::vector<std::pair<float, float>> scales;
    in.each(scale_role, false, [&](uint64_t expert, const OwnedTensor& s) { scales.push_back(shard_scales(s, in.where(scale_role, expert))); });
    Prepared p;
    p.multiplier = [scales](uint64_t e, float) { return std::max(scales.at(e).first, scales.at(e).second); };
    p.change = [scales](uint64_t e, OwnedTensor& w) {
      const bool fnuz = w.dtype == DType::F8_E4M3FNUZ;
      if ((w.dtype != DType::F8_E4M3 && !fnuz) || w.shape.size() != 2 || w.shape[0] % 2)
        throw_internal("fp8 requantization of a w13 that is not F8_E4M3(FNUZ) [2P, H]");
      const auto [s1, s3] = scales.at(e);
      const float inverse = 1.0f / std::max(s1, s3);
      // The fp16 weight times a 0-dim fp32 CUDA tensor computes in fp16's type: the scale is
      // rounded to fp16 first (checked on an H100 with torch 2.11), the product in fp32, the
      // result rounded to fp16.
      const float h1 = f16_to_float(float_to_f16(s1)), h3 = f16_to_float(float_to_f16(s3));
      const uint64_t half = w.bytes.size() / 2;
      for (uint64_t i = 0; i < w.bytes.size(); ++i) {
        const float s = i < half ? h1 : h3;
        const float dq = f16_to_float(float_to_f16((fnuz ? e4m3fnuz_to_float(w.bytes[i]) : e4m3_to_float(w.bytes[i])) * s));
        // fminf/fmaxf as the kernel clamps: a NaN becomes the bound it is compared with. On
        // FNUZ devices the bound is vLLM's 224 (quant_type_max of Float8_e4m3fnuz is 0x7E, not
        // 240) and HIP's saturating conversion writes the code.
        const float bound = fnuz ? 224.0f : 448.0f;
        const float clamped = std::fmax(-bound, std::fmin(dq * inverse, bound));
        w.bytes[i] = fnuz ? float_to_e4m3fnuz(clamped) : float_to_e4m3(clamped);
      }
    };
    return p;
  }
};

// FlashInfer's floor on block scales: w_scale.clamp_(min=1e-10) in fp32 (NaN stays NaN).
class ClampBlockScales final : public ValueStage {
 public:
  std::string name() const override { return layout_id::fp8_clamp_block_scales(); }
  Prepared prepare(const ReductionInput&) const override {
    Prepared p;
    p.multiplier = [](uint64_t, float m) { return m; };
    p.change = [](uint64_t, OwnedTensor& t) {
      if (t.dtype != DType::F32) throw_internal("fp8 block scale clamp of a " + std::string(dtype_name(t.dtype)) + " tensor (the loader makes them F32)");
      const float floor = 1e-10f;
      for (uint64_t i = 0; i < t.bytes.size(); i += 4) {
        float v;
        std::memcpy(&v, t.bytes.data() + i, 4);
        if (v < floor) std::memcpy(t.bytes.data() + i, &floor, 4);  // false for NaN: kept
      }
    };
    return p;
  }
};

}  // namespace

const LayerReduction* find_fp8_reduction(std::string_view id) {
  static const W13MaxScale w13_max;
  static const FiCutlassAlphas alphas[] = {{1, false}, {2, false}, {1, true}, {2, true}};
  if (id == w13_max.name()) return &w13_max;
  for (const FiCutlassAlphas& a : alphas)
    if (id == a.name()) return &a;
  return nullptr;
}

const ValueStage* find_fp8_value_stage(std::string_view id) {
  static const RequantW13 requant;
  static const ClampBlockScales clamp;
  if (id == requant.name()) return &requant;
  if (id == clamp.name()) return &clamp;
  return find_fp8_deepgemm_stage(id);
}

bool is_fp8_scale_role(const std::string& role) {
  return role.ends_with("_weight_scale") || role.ends_with("_weight_scale_inv") || role.ends_with("_input_scale");
}

namespace {

OwnedTensor sliced_fp8_scale(const std::string& role, const OwnedTensor& in, const RankGeometry& g) {
  const bool w13 = role.rfind("w13_", 0) == 0;
  // Per-tensor and input scales ([2], [1], []): copied whole.
  if (in.shape.size() <= 1) return widened(in);
  if (in.shape.size() != 2) throw_internal("fp8 loader: " + role + " is not 1-D or 2-D");
  const uint64_t I = g.intermediate, per_rank = I / g.tp_size, P = g.padded_intermediate;
  const uint64_t rows = in.shape[0], cols = in.shape[1];
  if (g.fp8_block_n == 0) {
    // Per-channel: w13 [2I, 1] narrowed like the weight's rows (gate at 0, up at P); w2 [H, 1]
    // is per output channel and copied whole.
    if (!w13) return widened(in);
    const uint64_t halves = g.gated ? 2 : 1;
    if (rows != halves * I || cols != 1) throw_internal("fp8 loader: " + role + " is not [" + std::to_string(halves * I) + ", 1]");
    OwnedTensor out(in.dtype, {halves * P, 1});
    for (uint64_t h = 0; h < halves; ++h) copy_rows(in, h * I + per_rank * g.tp_rank, per_rank, out, h * P, role);
    return widened(out);
  }
  // Block scales: blocks of the rank's slice, narrowed by whole blocks (vLLM requires the slice
  // to be a multiple of the block, ERRATA 8); no backend taking them pads the intermediate size.
  // The FP8 methods' create_weights raise these ValueErrors (fp8.py, compressed_tensors_moe_w8a8_fp8.py).
  if (per_rank % g.fp8_block_n != 0)
    throw Error(ErrorKind::refused, role + ": vLLM raises ValueError: The output_size of gate's and up's weight = " + std::to_string(per_rank) +
                                        " is not divisible by weight quantization block_n = " + std::to_string(g.fp8_block_n) + ".");
  if (g.tp_size > 1 && per_rank % g.fp8_block_k != 0)
    throw Error(ErrorKind::refused, role + ": vLLM raises ValueError: The input_size of down's weight = " + std::to_string(per_rank) +
                                        " is not divisible by weight quantization block_k = " + std::to_string(g.fp8_block_k) + ".");
  if (P != per_rank) throw Error(ErrorKind::refused, role + ": block-scaled FP8 with a padded intermediate size is not reproduced");
  if (g.padded_hidden != g.hidden)
    throw Error(ErrorKind::refused, role + ": block-scaled FP8 with a padded hidden size (" + std::to_string(g.hidden) + " -> " + std::to_string(g.padded_hidden) +
                                        ", the all2all backend's rounding) is not reproduced: the checkpoint's block scales do not cover the padded weight");
  if (w13) {
    const uint64_t halves = g.gated ? 2 : 1, whole = ceil_div(I, g.fp8_block_n), take = ceil_div(per_rank, g.fp8_block_n);
    if (rows != halves * whole) throw_internal("fp8 loader: " + role + " has " + std::to_string(rows) + " block rows, expected " + std::to_string(halves * whole));
    OwnedTensor out(in.dtype, {halves * take, cols});
    for (uint64_t h = 0; h < halves; ++h) copy_rows(in, h * whole + take * g.tp_rank, std::min(take, whole - std::min(whole, take * g.tp_rank)), out, h * take, role);
    return widened(out);
  }
  const uint64_t whole = ceil_div(I, g.fp8_block_k), take = ceil_div(per_rank, g.fp8_block_k);
  if (cols != whole) throw_internal("fp8 loader: " + role + " has " + std::to_string(cols) + " block columns, expected " + std::to_string(whole));
  OwnedTensor out(in.dtype, {rows, take});
  const uint64_t eb = static_cast<uint64_t>(dtype_bits(in.dtype) / 8), begin = take * g.tp_rank;
  for (uint64_t r = 0; r < rows; ++r)
    copy_param_elements(in, r * cols + begin, out, r * take, std::min(take, cols - std::min(cols, begin)), eb, role);
  return widened(out);
}

}  // namespace

OwnedTensor load_fp8_scale(const std::string& role, const OwnedTensor& in, const RankGeometry& g) {
  OwnedTensor out = sliced_fp8_scale(role, in, g);
  if (g.fp8_fnuz) {
    // normalize_e4m3fn_to_e4m3fnuz's scale half: weight and input scales times 2.0 in fp32.
    for (uint64_t i = 0; i < out.bytes.size(); i += 4) {
      float v;
      std::memcpy(&v, out.bytes.data() + i, 4);
      v *= 2.0f;
      std::memcpy(out.bytes.data() + i, &v, 4);
    }
  }
  return out;
}

}  // namespace moepack::convert
