#include "lib/convert/fp8_marlin.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "lib/core/codecs.h"
#include "lib/core/error.h"
#include "lib/core/layout_ids.h"
#include "packers/marlin_wna16.h"
#include "packers/registry.h"

namespace moepack::convert {
namespace {

float rounded(float v, DType d) {
  if (d == DType::BF16) return bf16_to_float(float_to_bf16(v));
  if (d == DType::F16) return f16_to_float(float_to_f16(v));
  throw_internal("fp8 Marlin scales in " + std::string(dtype_name(d)));
}

DType dtype_in(std::string_view id) {
  if (id.find("params_dtype=BF16") != std::string_view::npos) return DType::BF16;
  if (id.find("params_dtype=F16") != std::string_view::npos) return DType::F16;
  throw_internal("fp8 Marlin id without params_dtype: " + std::string(id));
}

enum class Kind { tensor, channel, block };

class Fp8MarlinScales final : public ExpertDerivation {
 public:
  Fp8MarlinScales(std::string role, std::string id, Kind kind, DType dtype, std::string inner)
      : role_(std::move(role)), id_(std::move(id)), kind_(kind), dtype_(dtype), inner_id_(std::move(inner)), inner_(packers::make_layout(inner_id_)) {}
  std::string name() const override { return id_; }
  std::vector<std::string> inputs() const override { return {role_}; }
  DType dtype() const override { return dtype_; }
  std::vector<uint64_t> slab_shape(std::span<const OwnedTensor> in, const RankGeometry& g) const override {
    return inner_->packed_shape(grid(in, g));
  }
  std::optional<Unpacked> unpacked(std::span<const OwnedTensor> in, const RankGeometry& g) const override { return Unpacked{dtype_, grid(in, g)}; }
  std::string reference_stage(const RankGeometry&) const override {
    return layout_id::fp8_marlin_scale_dtype(dtype_name(dtype_));
  }

  void produce(std::span<const OwnedTensor> in, const RankGeometry& g, std::span<uint8_t> out, const std::string& what) const override {
    const std::vector<uint64_t> shape = grid(in, g);
    const uint64_t G = shape[0], N = shape[1];
    const bool w13 = role_.rfind("w13_", 0) == 0;
    const uint64_t n = g.intermediate / g.tp_size, P = g.padded_intermediate;
    const OwnedTensor& s = in[0];
    OwnedTensor expanded(DType::F32, {G, N});
    const float bias = fp8_marlin_scale_bias(dtype_);
    for (uint64_t gi = 0; gi < G; ++gi)
      for (uint64_t c = 0; c < N; ++c) {
        float v = 0.0f;
        if (w13) {
          const uint64_t h = c / P, cc = c % P;
          if (cc < n) {
            if (kind_ == Kind::tensor) v = s.num_elements() == 2 ? std::max(float_element(s, 0), float_element(s, 1)) : float_element(s, 0);
            else if (kind_ == Kind::channel) v = float_element(s, h * P + cc);
            else v = float_element(s, (h * ((n + 127) / 128) + cc / 128) * s.shape[1] + gi);
          }
        } else {
          if (kind_ == Kind::tensor) v = float_element(s, 0);
          else if (kind_ == Kind::channel) v = float_element(s, c);
          else if (gi < s.shape[1]) v = float_element(s, (c / 128) * s.shape[1] + gi);
        }
        const float biased = rounded(v, dtype_) * bias;
        if (!std::isfinite(biased))
          throw Error(ErrorKind::bad_input, what + " " + role_ + ": scale " + std::to_string(v) + " times Marlin's exponent bias overflows " +
                                                std::string(dtype_name(dtype_)) + " (vLLM would write inf)");
        std::memcpy(expanded.bytes.data() + 4 * (gi * N + c), &biased, 4);
      }
    inner_->pack(expanded.view(), out);
  }

 private:
  // [G, N] of the channel- or group-wise scales vLLM permutes.
  std::vector<uint64_t> grid(std::span<const OwnedTensor>, const RankGeometry& g) const {
    const bool w13 = role_.rfind("w13_", 0) == 0;
    const uint64_t P = g.padded_intermediate, H = g.hidden;
    if (w13) return {kind_ == Kind::block ? H / 128 : 1, (g.gated ? 2 : 1) * P};
    return {kind_ == Kind::block ? P / 128 : 1, H};
  }

  std::string role_, id_;
  Kind kind_;
  DType dtype_;
  std::string inner_id_;
  std::unique_ptr<packers::Layout> inner_;
};

class ScaleDtypeStage final : public ValueStage {
 public:
  explicit ScaleDtypeStage(DType d) : d_(d) {}
  std::string name() const override { return layout_id::fp8_marlin_scale_dtype(dtype_name(d_)); }
  Prepared prepare(const ReductionInput&) const override {
    Prepared p;
    const DType d = d_;
    p.multiplier = [d](uint64_t, float m) { return rounded(m, d); };
    p.change = [d](uint64_t, OwnedTensor& t) {
      if (t.dtype != DType::F32) throw_internal("fp8 Marlin scale rounding of a " + std::string(dtype_name(t.dtype)) + " tensor");
      for (uint64_t i = 0; i < t.bytes.size(); i += 4) {
        float v;
        std::memcpy(&v, t.bytes.data() + i, 4);
        v = rounded(v, d);
        std::memcpy(t.bytes.data() + i, &v, 4);
      }
    };
    return p;
  }

 private:
  DType d_;
};

}  // namespace

float fp8_marlin_scale_bias(DType params_dtype) { return std::ldexp(1.0f, params_dtype == DType::BF16 ? 120 : 8); }

std::shared_ptr<const ExpertDerivation> make_fp8_marlin_scales(const std::string& role, const std::string& layout_id) {
  if (layout_id::head_of(layout_id) != layout_id::head::fp8_marlin_scales) return nullptr;
  const size_t sep = layout_id.find(packers::kPipelineSeparator);
  if (sep == std::string::npos) throw_internal("fp8 Marlin scales without their permutation: " + layout_id);
  const std::string head = layout_id.substr(0, sep);
  const Kind kind = head.find("kind=block") != std::string::npos ? Kind::block : head.find("kind=channel") != std::string::npos ? Kind::channel : Kind::tensor;
  return std::make_shared<Fp8MarlinScales>(role, layout_id, kind, dtype_in(head), layout_id.substr(sep + packers::kPipelineSeparator.size()));
}

const ValueStage* find_fp8_marlin_value_stage(std::string_view id) {
  static const ScaleDtypeStage bf16(DType::BF16), f16(DType::F16);
  if (id == bf16.name()) return &bf16;
  if (id == f16.name()) return &f16;
  return nullptr;
}

}  // namespace moepack::convert
