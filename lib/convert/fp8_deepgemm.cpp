// vLLM's UE8M0 requantization of FP8 block weights for DeepGEMM; what it computes and where
// vLLM defines it is in fp8_deepgemm.h.
#include "lib/convert/fp8_deepgemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "lib/core/codecs.h"
#include "lib/core/error.h"
#include "lib/core/layout_ids.h"
#include "packers/registry.h"

namespace moepack::convert {

float ceil_to_ue8m0(float x) {
  // fp32 log2 correctly rounded (a double log2 rounded once), then ceil and the exact power.
  const float l = static_cast<float>(std::log2(static_cast<double>(x)));
  return std::ldexp(1.0f, static_cast<int>(std::ceil(l)));
}

float ue8m0_block_scale(float amax) {
  // Inductor compiles `amax / 448.0` into a multiply by the fp32 constant 1/448 (seen in the
  // generated Triton kernel, torch 2.11 on an H100); a true division differs by an ulp.
  return ceil_to_ue8m0(std::max(amax, 1e-4f) * static_cast<float>(1.0 / 448.0));
}

Ue8m0Requant requant_ue8m0(const OwnedTensor& w, const OwnedTensor& s, const std::string& weight_where, const std::string& scale_where) {
  if (w.dtype != DType::F8_E4M3 || w.shape.size() != 2) throw_internal("UE8M0 requantization of a weight that is not F8_E4M3 [M, K]: " + weight_where);
  if (s.dtype != DType::F32 || s.shape.size() != 2) throw_internal("UE8M0 requantization with scales that are not F32 [M/128, K/128]: " + scale_where);
  const uint64_t M = w.shape[0], K = w.shape[1], B = kDeepGemmBlock;
  const uint64_t mb = (M + B - 1) / B, kb = (K + B - 1) / B;
  if (s.shape[0] != mb || s.shape[1] != kb)
    throw_internal("UE8M0 requantization: scale " + shape_string(s.shape) + " is not the 128x128 block grid of weight " + shape_string(w.shape));
  Ue8m0Requant out;
  out.codes.resize(static_cast<size_t>(M * K));
  out.scales.resize(static_cast<size_t>(mb * kb));
  std::vector<float> d(static_cast<size_t>(B * B));
  for (uint64_t bi = 0; bi < mb; ++bi) {
    for (uint64_t bj = 0; bj < kb; ++bj) {
      float old;
      std::memcpy(&old, s.bytes.data() + 4 * (bi * kb + bj), 4);
      if (!std::isfinite(old) || old <= 0.0f)
        throw_bad_input(scale_where, "block (" + std::to_string(bi) + ", " + std::to_string(bj) + ")",
                        "block scale " + std::to_string(old) + " is not a positive finite number (vLLM would requantize the block with it)");
      const uint64_t r0 = bi * B, r1 = std::min(M, r0 + B), c0 = bj * B, c1 = std::min(K, c0 + B), cols = c1 - c0;
      float amax = 0.0f;
      for (uint64_t r = r0; r < r1; ++r)
        for (uint64_t c = c0; c < c1; ++c) {
          const uint8_t code = w.bytes[r * K + c];
          if ((code & 0x7F) == 0x7F)
            throw_bad_input(weight_where, "element (" + std::to_string(r) + ", " + std::to_string(c) + ")",
                            "E4M3 code NaN: vLLM's UE8M0 requantization would make its whole 128x128 block NaN");
          const float v = e4m3_to_float(code) * old;
          d[(r - r0) * cols + (c - c0)] = v;
          amax = std::max(amax, std::fabs(v));
        }
      if (!std::isfinite(amax))
        throw_bad_input(weight_where, "block (" + std::to_string(bi) + ", " + std::to_string(bj) + ")",
                        "dequantized values overflow fp32 (code times block scale): vLLM's requantization would write NaN");
      const float scale = ue8m0_block_scale(amax);
      const float inverse = 1.0f / scale;
      out.scales[bi * kb + bj] = scale;
      for (uint64_t r = r0; r < r1; ++r)
        for (uint64_t c = c0; c < c1; ++c) out.codes[r * K + c] = float_to_e4m3(d[(r - r0) * cols + (c - c0)] * inverse);
    }
  }
  return out;
}

namespace {

// "w13_weight" -> its block scale role in this layer ("w13_weight_scale_inv" for Fp8MoEMethod).
std::string scale_role_of(const ReductionInput& in, const std::string& weight_role) {
  for (const char* suffix : {"_scale_inv", "_scale"})
    if (in.has(weight_role + suffix)) return weight_role + suffix;
  throw_internal("UE8M0 requantization: " + weight_role + " has no block scale");
}

// The weight role of a block scale role ("w2_weight_scale_inv" -> "w2_weight").
std::string weight_role_of(const std::string& scale_role) {
  const size_t at = scale_role.find("_weight");
  if (at == std::string::npos) throw_internal("UE8M0 requantization: " + scale_role + " is not a weight scale");
  return scale_role.substr(0, at + 7);
}

// The requantized weight: reads only the rank's scales (small) up front; each expert's codes
// are recomputed from its weight when the packer asks for it.
class RequantWeight final : public ValueStage {
 public:
  std::string name() const override { return layout_id::deep_gemm_requant_ue8m0("weight"); }
  Prepared prepare(const ReductionInput& in) const override {
    const std::string scale_role = scale_role_of(in, in.role);
    auto scales = std::make_shared<std::vector<OwnedTensor>>();
    auto where = std::make_shared<std::vector<std::pair<std::string, std::string>>>();
    in.each(scale_role, false, [&](uint64_t expert, const OwnedTensor& s) {
      scales->push_back(s);
      where->push_back({in.where(in.role, expert), in.where(scale_role, expert)});
    });
    Prepared p;
    p.multiplier = [](uint64_t, float m) { return m; };
    p.change = [scales, where](uint64_t e, OwnedTensor& w) {
      Ue8m0Requant r = requant_ue8m0(w, scales->at(e), where->at(e).first, where->at(e).second);
      std::memcpy(w.bytes.data(), r.codes.data(), r.codes.size());
    };
    return p;
  }
};

// The new block scales: each expert's weight is read once here, one expert at a time, and only
// the scale grids are kept.
class RequantScale final : public ValueStage {
 public:
  std::string name() const override { return layout_id::deep_gemm_requant_ue8m0("scale"); }
  Prepared prepare(const ReductionInput& in) const override {
    const std::string weight_role = weight_role_of(in.role);
    std::vector<OwnedTensor> old_scales;
    std::vector<uint64_t> ids;
    in.each(in.role, false, [&](uint64_t expert, const OwnedTensor& s) {
      old_scales.push_back(s);
      ids.push_back(expert);
    });
    auto grids = std::make_shared<std::vector<std::vector<float>>>();
    size_t i = 0;
    in.each(weight_role, false, [&](uint64_t expert, const OwnedTensor& w) {
      if (i >= old_scales.size() || ids[i] != expert) throw_internal("UE8M0 requantization: weights and scales visit different experts");
      grids->push_back(requant_ue8m0(w, old_scales[i], in.where(weight_role, expert), in.where(in.role, expert)).scales);
      ++i;
    });
    Prepared p;
    p.multiplier = [](uint64_t, float m) { return m; };
    p.change = [grids](uint64_t e, OwnedTensor& s) {
      const std::vector<float>& g = grids->at(e);
      if (s.dtype != DType::F32 || s.bytes.size() != 4 * g.size()) throw_internal("UE8M0 requantization: scale param changed shape");
      std::memcpy(s.bytes.data(), g.data(), s.bytes.size());
    };
    return p;
  }
};

}  // namespace

const ValueStage* find_fp8_deepgemm_stage(std::string_view id) {
  static const RequantWeight weight;
  static const RequantScale scale;
  if (id == weight.name()) return &weight;
  return id == scale.name() ? &scale : nullptr;
}

namespace {

// "deep_gemm.fp8_block_scales(...) | <the packer the grid goes through>".
const std::string kSm100ScalesPrefix = layout_id::deep_gemm_fp8_block_scales() + std::string(layout_id::kPipelineSeparator);

class DeepGemmSm100Scales final : public ExpertDerivation {
 public:
  DeepGemmSm100Scales(std::string scale_role, std::string inner)
      : scale_(std::move(scale_role)), weight_(scale_.substr(0, scale_.find('_') + 1) + "weight"), inner_id_(std::move(inner)),
        inner_(packers::make_layout(inner_id_)) {}
  std::string name() const override { return std::string(kSm100ScalesPrefix) + inner_id_; }
  std::vector<std::string> inputs() const override { return {scale_, weight_}; }
  DType dtype() const override { return DType::I32; }
  std::vector<uint64_t> slab_shape(std::span<const OwnedTensor> in, const RankGeometry&) const override { return inner_->packed_shape(grid(in)); }
  std::optional<Unpacked> unpacked(std::span<const OwnedTensor> in, const RankGeometry&) const override { return Unpacked{DType::U8, grid(in)}; }
  std::string reference_stage(const RankGeometry&) const override { return layout_id::deep_gemm_requant_ue8m0("scale"); }
  void produce(std::span<const OwnedTensor> in, const RankGeometry&, std::span<uint8_t> out, const std::string& what) const override {
    const Ue8m0Requant r = requant_ue8m0(in[1], in[0], what + " " + weight_, what + " " + scale_);
    const std::vector<uint64_t> shape = grid(in);
    const uint64_t rows = shape[0], groups = shape[1];
    OwnedTensor bytes(DType::U8, shape);
    for (uint64_t mn = 0; mn < rows; ++mn)
      for (uint64_t c = 0; c < groups; ++c) {
        uint32_t bits;
        std::memcpy(&bits, &r.scales[(mn / kDeepGemmBlock) * groups + c], 4);
        bytes.bytes[mn * groups + c] = static_cast<uint8_t>(bits >> 23);  // s' is a positive power of two
      }
    inner_->pack(bytes.view(), out);
  }

 private:
  // [M, K/128]: the weight's rows, the scale grid's columns.
  static std::vector<uint64_t> grid(std::span<const OwnedTensor> in) { return {in[1].shape[0], in[0].shape[1]}; }

  std::string scale_, weight_, inner_id_;
  std::unique_ptr<packers::Layout> inner_;
};

}  // namespace

std::shared_ptr<const ExpertDerivation> make_deepgemm_sm100_scales(const std::string& role, const std::string& layout_id) {
  if (layout_id.rfind(kSm100ScalesPrefix, 0) != 0) return nullptr;
  return std::make_shared<DeepGemmSm100Scales>(role, layout_id.substr(kSm100ScalesPrefix.size()));
}

}  // namespace moepack::convert
