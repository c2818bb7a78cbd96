// See reductions.h for what each reduction is and where vLLM defines it.
#include "lib/convert/reductions.h"

#include <cmath>
#include <cstring>

#include "lib/core/codecs.h"
#include <initializer_list>

#include "lib/convert/derivation_registry.h"
#include "lib/core/error.h"
#include "lib/core/layout_ids.h"

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
  explicit MaxOverExpertsF32(bool all_experts) : all_experts_(all_experts) {}
  std::string name() const override { return layout_id::max_over_experts(all_experts_); }
  DType dtype() const override { return DType::F32; }
  std::vector<uint64_t> shape(uint64_t) const override { return {}; }
  void reduce(const ReductionInput& in, std::span<uint8_t> out) const override {
    if (out.size() != 4) throw_internal("max_over_experts writes 4 bytes");
    const float best = max_scalar_over_experts(in, in.role, all_experts_);
    std::memcpy(out.data(), &best, 4);
  }

 private:
  bool all_experts_;  // every expert of the layer (EPLB's all-reduce), else the rank's
};

// vLLM's `torch.empty((0,), dtype=torch.int32)`: one empty I32 tensor for the whole layer, not
// per expert (the XPU WNA16 branch hands it back for GPTQ's g_idx and sort indices). No bytes.
class EmptyInt32 final : public LayerReduction {
 public:
  std::string name() const override { return layout_id::empty_int32(); }
  DType dtype() const override { return DType::I32; }
  std::vector<uint64_t> shape(uint64_t) const override { return {0}; }
  void reduce(const ReductionInput&, std::span<uint8_t> out) const override {
    if (!out.empty()) throw_internal("empty_int32 writes no bytes");
  }
  bool reads_other_roles() const override { return true; }
};

}  // namespace

float max_scalar_over_experts(const ReductionInput& in, const std::string& role, bool whole_layer) {
  bool any = false;
  float best = 0.0f;
  in.each(role, whole_layer, [&](uint64_t, const OwnedTensor& t) {
    const float v = scalar_as_float(t);
    if (!any || std::isnan(v) || (!std::isnan(best) && v > best)) best = v;  // NaN wins, as in torch.max
    any = true;
  });
  if (!any) throw_internal("max_over_experts of no experts (" + role + ")");
  return best;
}

std::vector<OwnedTensor> ReductionInput::gather(const std::string& of_role, bool whole_layer) const {
  std::vector<OwnedTensor> out;
  each(of_role, whole_layer, [&](uint64_t, const OwnedTensor& t) { out.push_back(t); });
  return out;
}

const LayerReduction* find_generic_reduction(std::string_view layout_id) {
  static const MaxOverExpertsF32 max_over_rank(false), max_over_layer(true);
  static const EmptyInt32 empty_int32;
  for (const LayerReduction* r : std::initializer_list<const LayerReduction*>{&max_over_rank, &max_over_layer, &empty_int32})
    if (layout_id == r->name()) return r;
  return nullptr;
}

const LayerReduction* find_reduction(std::string_view layout_id) {
  const ComputationRow* row = find_computation(ComputationKind::reduction, layout_id);
  return row ? row->reduce(layout_id) : nullptr;
}

const ValueStage* find_value_stage(std::string_view id) {
  const ComputationRow* row = find_computation(ComputationKind::value_stage, id);
  return row ? row->stage(id) : nullptr;
}

}  // namespace moepack::convert
