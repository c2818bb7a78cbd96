#include "lib/convert/w4a8_cutlass.h"

#include <cmath>
#include <cstring>
#include <map>
#include <mutex>

#include "lib/core/codecs.h"
#include "lib/core/error.h"
#include "packers/cutlass_w4a8.h"
#include "packers/registry.h"

namespace moepack::convert {
namespace {

std::string stage_name(uint64_t tp) { return layout_id::w4a8_fp8_weight_values(static_cast<int>(tp)); }

// The row scales of one expert projection's loaded group scales [N, G], each row cut into
// `slices` equal runs of groups (T ranks' w2 slices), cast to bf16 as vLLM's loader does.
struct Fp8Scales {
  OwnedTensor fp8;             // F8_E4M3 [N, G]
  std::vector<float> channel;  // [N * slices]
};

Fp8Scales fp8_scales(const OwnedTensor& loaded, uint64_t slices, const std::string& where) {
  if (loaded.shape.size() != 2 || loaded.shape[1] == 0 || loaded.shape[1] % slices)
    throw Error(ErrorKind::bad_input, where + ": W4A8 group scales " + shape_string(loaded.shape) + " do not split into " + std::to_string(slices) +
                                          " rank slices of whole groups");
  const OwnedTensor bf16 = cast_float_tensor(loaded, DType::BF16);
  const uint64_t rows = loaded.shape[0], groups = loaded.shape[1], per = groups / slices;
  Fp8Scales out{OwnedTensor(DType::F8_E4M3, {rows, groups}), std::vector<float>(static_cast<size_t>(rows * slices))};
  std::vector<float> row(static_cast<size_t>(per));
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t s = 0; s < slices; ++s) {
      for (uint64_t g = 0; g < per; ++g) {
        const float v = float_element(bf16, r * groups + s * per + g);
        if (!std::isfinite(v) || std::signbit(v))
          throw Error(ErrorKind::bad_input, where + ": the group scale at [" + std::to_string(r) + ", " + std::to_string(s * per + g) + "] is " +
                                                std::to_string(v) + "; W4A8 group scales must be finite and non-negative (sign bit clear)");
        row[static_cast<size_t>(g)] = v;
      }
      out.channel[static_cast<size_t>(r * slices + s)] =
          w4a8_fp8_row(row, std::span<uint8_t>(out.fp8.bytes).subspan(static_cast<size_t>(r * groups + s * per), static_cast<size_t>(per)));
    }
  return out;
}

// The value table of rows [N, G] of s8 codes with one channel scale per row and slice.
OwnedTensor value_table(const OwnedTensor& fp8, std::span<const float> channel, uint64_t slices) {
  const uint64_t rows = fp8.shape[0], groups = fp8.shape[1], per = groups / slices;
  OwnedTensor out(DType::F32, {rows, 16 * groups});
  std::vector<float> v(static_cast<size_t>(16 * groups));
  for (uint64_t r = 0; r < rows; ++r) {
    for (uint64_t g = 0; g < groups; ++g) {
      const std::array<uint8_t, 8> lut = packers::CutlassW4a8ScaleLayout::lookup_table(fp8.bytes[static_cast<size_t>(r * groups + g)]);
      const float c = channel[static_cast<size_t>(r * slices + g / per)];
      for (int code = 0; code < 16; ++code) {
        // CutlassExpertsW4A8Fp8's conversion (cutlass detail/collective/mixed_input_utils.hpp,
        // lookup_table_convert): w < 0 reads the table at w + 8; w > 0 the negated entry at 8 - w;
        // w = 0 a zero.
        const int w = code - 8;
        const float lut_value = w < 0 ? e4m3_to_float(lut[static_cast<size_t>(w + 8)]) : w > 0 ? -e4m3_to_float(lut[static_cast<size_t>(8 - w)]) : 0.0f;
        v[static_cast<size_t>(16 * g + static_cast<uint64_t>(code))] = lut_value * c;
      }
    }
    std::memcpy(out.bytes.data() + r * 16 * groups * 4, v.data(), v.size() * 4);
  }
  return out;
}

class W4a8GroupScales final : public ExpertDerivation {
 public:
  W4a8GroupScales(std::string role, std::string id, const std::string& inner)
      : role_(std::move(role)), id_(std::move(id)), inner_(packers::make_layout(inner)) {}
  std::string name() const override { return id_; }
  std::vector<std::string> inputs() const override { return {role_}; }
  DType dtype() const override { return DType::F8_E4M3; }
  std::vector<uint64_t> slab_shape(std::span<const OwnedTensor> in, const RankGeometry&) const override { return inner_->packed_shape(in[0].shape); }
  std::optional<std::vector<uint64_t>> parameter_shape(uint64_t experts, std::span<const OwnedTensor> in, const RankGeometry&) const override {
    return inner_->parameter_shape(experts, in[0].shape);
  }
  std::optional<Unpacked> unpacked(std::span<const OwnedTensor> in, const RankGeometry&) const override { return Unpacked{DType::F8_E4M3, in[0].shape}; }
  std::string reference_stage(const RankGeometry& g) const override { return stage_name(g.tp_size); }
  void produce(std::span<const OwnedTensor> in, const RankGeometry& g, std::span<uint8_t> out, const std::string& what) const override {
    expect_bf16(g);
    const Fp8Scales s = fp8_scales(in[0], 1, what + " " + role_);
    inner_->pack(s.fp8.view(), out);
  }

  static void expect_bf16(const RankGeometry& g) {
    // CutlassExpertsW4A8Fp8 takes bf16 models only (the oracle refuses the rest), so the scale
    // parameters are bf16.
    if (g.params_dtype != DType::BF16) throw_internal("W4A8 scales in " + std::string(dtype_name(g.params_dtype)) + " parameters");
  }

 private:
  std::string role_, id_;
  std::unique_ptr<packers::Layout> inner_;
};

class W4a8ChannelScales final : public ExpertDerivation {
 public:
  W4a8ChannelScales(std::string role, std::string id) : role_(std::move(role)), id_(std::move(id)) {
    const size_t at = role_.find("_weight_chan_scale");
    if (at == std::string::npos) throw_internal("W4A8 channel scales for role " + role_);
    input_ = role_.substr(0, at) + "_weight_scale";
  }
  std::string name() const override { return id_; }
  std::vector<std::string> inputs() const override { return {input_}; }
  DType dtype() const override { return DType::F32; }
  std::vector<uint64_t> slab_shape(std::span<const OwnedTensor> in, const RankGeometry&) const override { return {in[0].shape.at(0), 1}; }
  std::optional<Unpacked> unpacked(std::span<const OwnedTensor> in, const RankGeometry&) const override { return Unpacked{DType::F32, {in[0].shape.at(0), 1}}; }
  void produce(std::span<const OwnedTensor> in, const RankGeometry& g, std::span<uint8_t> out, const std::string& what) const override {
    W4a8GroupScales::expect_bf16(g);
    const Fp8Scales s = fp8_scales(in[0], 1, what + " " + input_);
    if (out.size() != s.channel.size() * 4) throw_internal("W4A8 channel scales: slab of " + std::to_string(out.size()) + " bytes");
    std::memcpy(out.data(), s.channel.data(), out.size());
  }

 private:
  std::string role_, id_, input_;
};

class WeightValuesStage final : public ValueStage {
 public:
  explicit WeightValuesStage(uint64_t tp) : tp_(tp) {}
  std::string name() const override { return stage_name(tp_); }
  Prepared prepare(const ReductionInput& in) const override {
    // Only w2 is sliced along its groups by tensor parallelism; a w13 row is whole on a rank.
    const uint64_t slices = in.role.rfind("w2_", 0) == 0 ? tp_ : 1;
    const std::string role = in.role;
    Prepared p;
    p.change = [slices, role](uint64_t, OwnedTensor& t) {
      const Fp8Scales s = fp8_scales(t, slices, "W4A8 reference " + role);
      t = value_table(s.fp8, s.channel, slices);
    };
    p.multiplier = [](uint64_t, float m) { return m; };
    return p;
  }

 private:
  uint64_t tp_;
};

}  // namespace

float w4a8_fp8_row(std::span<const float> values, std::span<uint8_t> fp8) {
  constexpr float kFp8Max = 448.0f;
  // dynamic_per_token_scaled_fp8_quant: the row's absolute maximum, then the token scale.
  float amax = 0.0f;
  for (float v : values) amax = std::fmax(amax, std::fabs(v));
  const float min_scale = 1.0f / (kFp8Max * 512.0f);
  const float scale = std::fmax(amax / kFp8Max, min_scale);
  for (size_t g = 0; g < values.size(); ++g) {
    const float x = values[g] / scale;
    const uint8_t q = float_to_e4m3(std::fmax(-kFp8Max, std::fmin(x, kFp8Max)));
    fp8[g] = float_to_e4m3(e4m3_to_float(q) * 0.125f);  // (fp8.float() / 8.0).to(float8_e4m3fn)
  }
  return scale * 8.0f;
}

std::shared_ptr<const ExpertDerivation> make_w4a8_cutlass_derivation(const std::string& role, const std::string& layout_id) {
  const size_t sep = layout_id.find(packers::kPipelineSeparator);
  if (sep == std::string::npos) return nullptr;
  const std::string head = layout_id.substr(0, sep), inner = layout_id.substr(sep + packers::kPipelineSeparator.size());
  if (head == layout_id::w4a8_fp8_group_scales()) return std::make_shared<W4a8GroupScales>(role, layout_id, inner);
  if (head == layout_id::w4a8_fp8_channel_scales()) {
    if (inner != layout_id::unchanged) throw_internal("W4A8 channel scales through " + inner);
    return std::make_shared<W4a8ChannelScales>(role, layout_id);
  }
  return nullptr;
}

const ValueStage* find_w4a8_value_stage(std::string_view id) {
  // The id is parsed by its one variable, the TP size, and must then be exactly its spelling.
  if (layout_id::head_of(id) != layout_id::head::w4a8_fp8_weight_values) return nullptr;
  const std::string_view args = id.substr(layout_id::head::w4a8_fp8_weight_values.size());
  constexpr std::string_view kTpArg = "(tp=";
  if (!args.starts_with(kTpArg)) return nullptr;
  uint64_t tp = 0;
  for (size_t i = kTpArg.size(); i < args.size() && args[i] >= '0' && args[i] <= '9' && tp <= 1000000; ++i) tp = tp * 10 + static_cast<uint64_t>(args[i] - '0');
  if (tp == 0 || tp > 1000000 || id != stage_name(tp)) return nullptr;
  static std::mutex mutex;
  static std::map<uint64_t, std::unique_ptr<WeightValuesStage>> stages;
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = stages[tp];
  if (!slot) slot = std::make_unique<WeightValuesStage>(tp);
  return slot.get();
}

OwnedTensor w4a8_fp8_value_table(const OwnedTensor& fp8_scales, const OwnedTensor& channel_scales, const std::string& where) {
  if (fp8_scales.dtype != DType::F8_E4M3 || fp8_scales.shape.size() != 2)
    throw Error(ErrorKind::bad_input, where + ": W4A8 FP8 group scales must be F8_E4M3 [N, G], got " + shape_string(fp8_scales.shape));
  const uint64_t rows = fp8_scales.shape[0];
  if (channel_scales.dtype != DType::F32 || channel_scales.shape != std::vector<uint64_t>{rows, 1})
    throw Error(ErrorKind::bad_input, where + ": W4A8 channel scales must be F32 [" + std::to_string(rows) + ", 1], got " + shape_string(channel_scales.shape));
  std::vector<float> channel(static_cast<size_t>(rows));
  std::memcpy(channel.data(), channel_scales.bytes.data(), channel.size() * 4);
  return value_table(fp8_scales, channel, 1);
}

}  // namespace moepack::convert
