// See reductions.h for what each reduction is and where vLLM defines it.
#include "lib/convert/reductions.h"

#include <cmath>
#include <cstring>

#include "lib/core/codecs.h"
#include "lib/convert/nvfp4_prepare.h"
#include "lib/core/error.h"

namespace moepack::convert {
namespace {

float scalar_as_float(const OwnedTensor& t) {
  uint64_t elements = 1;
  for (uint64_t d : t.shape) elements *= d;
  if (elements != 1) throw_internal("max_over_experts expects one scalar per expert, got shape " + shape_string(t.shape));
  switch (t.dtype) {
    case DType::F32: {
      float v;
      std::memcpy(&v, t.bytes.data(), 4);
      return v;
    }
    case DType::BF16: return bf16_to_float(static_cast<uint16_t>(t.bytes[0] | (t.bytes[1] << 8)));
    case DType::F16: return f16_to_float(static_cast<uint16_t>(t.bytes[0] | (t.bytes[1] << 8)));
    default: throw_internal(std::string("max_over_experts expects float scalars, got ") + std::string(dtype_name(t.dtype)));
  }
}

class MaxOverExpertsF32 final : public LayerReduction {
 public:
  std::string name() const override { return "vllm.max_over_experts(f32)"; }
  DType dtype() const override { return DType::F32; }
  std::vector<uint64_t> shape(uint64_t) const override { return {}; }
  void reduce(const ReductionInput& in, std::span<uint8_t> out) const override {
    const std::vector<OwnedTensor> experts = in.gather(in.role);
    if (experts.empty()) throw_internal("max_over_experts of no experts");
    if (out.size() != 4) throw_internal("max_over_experts writes 4 bytes");
    float best = scalar_as_float(experts[0]);
    for (size_t e = 1; e < experts.size() && !std::isnan(best); ++e) {
      const float v = scalar_as_float(experts[e]);
      if (std::isnan(v) || v > best) best = v;  // NaN wins, as in torch.max
    }
    std::memcpy(out.data(), &best, 4);
  }
};

}  // namespace

std::vector<OwnedTensor> ReductionInput::gather(const std::string& of_role, bool whole_layer) const {
  std::vector<OwnedTensor> out;
  each(of_role, whole_layer, [&](uint64_t, const OwnedTensor& t) { out.push_back(t); });
  return out;
}

const LayerReduction* find_reduction(std::string_view layout_id) {
  static const MaxOverExpertsF32 max_over_experts;
  if (layout_id == max_over_experts.name()) return &max_over_experts;
  return find_nvfp4_reduction(layout_id);
}

const ValueStage* find_value_stage(std::string_view id) { return find_nvfp4_value_stage(id); }

}  // namespace moepack::convert
