#include "lib/convert/cpu_int4.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "lib/core/error.h"
#include "lib/core/layout_ids.h"
#include "packers/cpu_sgl_int4.h"
#include "packers/registry.h"

namespace moepack::convert {
namespace {

namespace pk = packers;

enum class ZeroSource { qzeros_plus_1, awq_qzeros, synthetic };

struct ZeroMode {
  ZeroSource source;
  const char* id;
};
constexpr std::array<ZeroMode, 3> kZeroModes = {
    {{ZeroSource::qzeros_plus_1, "qzeros_plus_1"}, {ZeroSource::awq_qzeros, "awq_qzeros"}, {ZeroSource::synthetic, "synthetic_0x77777777"}}};

// The two derivations' ids, given the zero-point mode (layout_ids.h).
using StageId = std::string (*)(std::string_view zeros);
constexpr StageId kZeroStage = &layout_id::cpu_sgl_int4_zero_points;
constexpr StageId kWeightStage = &layout_id::cpu_sgl_int4_compensation;

// "<stage(mode)> | <inner>": the mode and the inner packer id, or nullopt.
struct ParsedId {
  ZeroSource source;
  std::string inner;
};
std::optional<ParsedId> parse(const std::string& id, StageId stage) {
  for (const ZeroMode& m : kZeroModes) {
    const std::string head = stage(m.id) + std::string(pk::kPipelineSeparator);
    if (id.starts_with(head)) return ParsedId{m.source, id.substr(head.size())};
  }
  return std::nullopt;
}

std::string mode_id(ZeroSource s) {
  for (const ZeroMode& m : kZeroModes)
    if (m.source == s) return m.id;
  return "?";
}

uint32_t word_at(const OwnedTensor& t, uint64_t i) {
  uint32_t v;
  std::memcpy(&v, t.bytes.data() + 4 * i, 4);
  return v;
}

// z[g][n] as convert_weight_packed_scale_zp unpacks it, I8 [G, N]. `in` is the zero-point param
// I32 [G, N/8] (or, synthetic, the scales [G, N], read for their shape only).
OwnedTensor unpacked_zero_points(ZeroSource source, const OwnedTensor& in, const std::string& what) {
  if (in.shape.size() != 2) throw Error(ErrorKind::bad_input, what + ": expected a 2-D [groups, outputs] tensor, got " + shape_string(in.shape));
  const uint64_t groups = in.shape[0];
  if (source == ZeroSource::synthetic) {
    OwnedTensor z(DType::I8, {groups, in.shape[1]});
    std::fill(z.bytes.begin(), z.bytes.end(), uint8_t{8});  // 0x7 per nibble, plus the GPTQ unpack's 1
    return z;
  }
  if (in.dtype != DType::I32) throw Error(ErrorKind::bad_input, what + ": zero points must be I32 packed words, got " + std::string(dtype_name(in.dtype)));
  static constexpr std::array<unsigned, 8> kAwqField = {0, 4, 1, 5, 2, 6, 3, 7};
  const uint64_t words = in.shape[1], n_size = 8 * words;
  OwnedTensor z(DType::I8, {groups, n_size});
  for (uint64_t g = 0; g < groups; ++g)
    for (uint64_t n = 0; n < n_size; ++n) {
      const unsigned field = source == ZeroSource::awq_qzeros ? kAwqField[n % 8] : static_cast<unsigned>(n % 8);
      const uint32_t code = (word_at(in, g * words + n / 8) >> (4 * field)) & 0xFu;
      z.bytes[g * n_size + n] = static_cast<uint8_t>(code + (source == ZeroSource::qzeros_plus_1 ? 1 : 0));
    }
  return z;
}

std::string prefix_of(const std::string& role) { return role.substr(0, role.find('_') + 1); }  // "w13_" / "w2_"

std::string pick(const std::set<std::string>& available, const std::string& prefix, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (available.count(prefix + n)) return prefix + n;
  return {};
}

// The param a derivation reads its zero points (or, synthetic, their shape) from.
std::string zero_input(ZeroSource source, const std::string& role, const std::set<std::string>& available, const ckpt::MoeLayer& layer) {
  const std::string prefix = prefix_of(role);
  const std::string name =
      source == ZeroSource::synthetic ? pick(available, prefix, {"scales", "weight_scale"}) : pick(available, prefix, {"qzeros", "weight_zero_point"});
  if (name.empty())
    throw Error(ErrorKind::bad_input, "layer " + layer.prefix + ": the CPU INT4 pack of " + role + " needs " + prefix +
                                          (source == ZeroSource::synthetic ? "scales" : "qzeros") + ", which the checkpoint does not have");
  return name;
}

class CpuInt4ZeroPoints final : public ExpertDerivation {
 public:
  CpuInt4ZeroPoints(ZeroSource source, std::string input, std::string inner)
      : source_(source), input_(std::move(input)), inner_id_(std::move(inner)), inner_(pk::make_layout(inner_id_)) {}
  std::string name() const override {
    return layout_id::pipeline({kZeroStage(mode_id(source_)), inner_id_});
  }
  std::vector<std::string> inputs() const override { return {input_}; }
  DType dtype() const override { return DType::I8; }
  std::vector<uint64_t> slab_shape(std::span<const OwnedTensor> in, const RankGeometry&) const override { return inner_->packed_shape(zero_shape(in[0])); }
  std::optional<Unpacked> unpacked(std::span<const OwnedTensor> in, const RankGeometry&) const override { return Unpacked{DType::I8, zero_shape(in[0])}; }
  void produce(std::span<const OwnedTensor> in, const RankGeometry&, std::span<uint8_t> out, const std::string& what) const override {
    const OwnedTensor z = unpacked_zero_points(source_, in[0], what + " " + input_);
    inner_->pack(z.view(), out);
  }

 private:
  std::vector<uint64_t> zero_shape(const OwnedTensor& in) const {
    if (in.shape.size() != 2) return in.shape;  // refused by the packer's shape check
    return {in.shape[0], source_ == ZeroSource::synthetic ? in.shape[1] : 8 * in.shape[1]};
  }
  ZeroSource source_;
  std::string input_;
  std::string inner_id_;
  std::unique_ptr<pk::Layout> inner_;
};

class CpuInt4Weight final : public ExpertDerivation {
 public:
  CpuInt4Weight(ZeroSource source, std::string weight, std::string zeros, std::string inner)
      : source_(source),
        weight_(std::move(weight)),
        zeros_(std::move(zeros)),
        inner_id_(std::move(inner)),
        inner_(pk::make_layout(inner_id_)),
        layout_(dynamic_cast<const pk::CpuSglInt4WeightLayout&>(*inner_)) {}
  std::string name() const override {
    return layout_id::pipeline({kWeightStage(mode_id(source_)), inner_id_});
  }
  std::vector<std::string> inputs() const override { return {weight_, zeros_}; }
  DType dtype() const override { return DType::U8; }
  std::vector<uint64_t> slab_shape(std::span<const OwnedTensor> in, const RankGeometry&) const override { return layout_.packed_shape(in[0].shape); }
  void produce(std::span<const OwnedTensor> in, const RankGeometry&, std::span<uint8_t> out, const std::string& what) const override {
    const OwnedTensor& w = in[0];
    layout_.pack(w.view(), out);  // refuses a dtype or shape the op cannot take (bad_input)
    const auto [size_k, size_n] = layout_.size_kn(w.shape);
    const OwnedTensor z = unpacked_zero_points(source_, in[1], what + " " + zeros_);
    const uint64_t groups = z.shape[0];
    if (z.shape[1] != size_n || groups == 0 || size_k % groups != 0)
      throw Error(ErrorKind::bad_input, what + " " + zeros_ + ": zero points for " + std::to_string(groups) + " groups of " + std::to_string(z.shape[1]) +
                                            " outputs do not fit the weight's " + std::to_string(size_k) + " inputs and " + std::to_string(size_n) +
                                            " outputs");
    const uint64_t group_size = size_k / groups, block_k = layout_.block_k();
    const auto* zp = reinterpret_cast<const int8_t*>(z.bytes.data());
    for (uint64_t n = 0; n < size_n; ++n)
      for (uint64_t kc = 0; kc < size_k / block_k; ++kc) {
        int32_t sum = 0;
        for (uint64_t k = kc * block_k; k < (kc + 1) * block_k; ++k) {
          const uint64_t unit = layout_.canonical_unit(k, n, size_n);
          const int32_t q = static_cast<int32_t>((word_at(w, unit / 8) >> (4 * (unit % 8))) & 0xFu);
          sum += q - zp[(k / group_size) * size_n + n];
        }
        std::memcpy(out.data() + layout_.compensation_byte(kc, n, size_k), &sum, 4);
      }
  }

 private:
  ZeroSource source_;
  std::string weight_, zeros_;
  std::string inner_id_;
  std::unique_ptr<pk::Layout> inner_;
  const pk::CpuSglInt4WeightLayout& layout_;  // *inner_
};

}  // namespace

bool is_cpu_int4_derivation(const std::string& layout_id) { return parse(layout_id, kZeroStage).has_value() || parse(layout_id, kWeightStage).has_value(); }

std::shared_ptr<const ExpertDerivation> make_cpu_int4_derivation(const std::string& role, const std::string& layout_id, const std::set<std::string>& available,
                                                                 const ckpt::MoeLayer& layer) {
  if (auto z = parse(layout_id, kZeroStage)) {
    if (z->inner != pk::CpuSglInt4GroupRowsLayout(pk::CpuInt4GroupRows::zero_points_i8).name())
      throw_internal("CPU INT4 zero points end in `" + z->inner + "`, not the blocked zero-point packer");
    return std::make_shared<CpuInt4ZeroPoints>(z->source, zero_input(z->source, role, available, layer), z->inner);
  }
  auto w = parse(layout_id, kWeightStage);
  if (!w) return nullptr;
  if (!dynamic_cast<const pk::CpuSglInt4WeightLayout*>(pk::make_layout(w->inner).get()))
    throw_internal("CPU INT4 compensation ends in `" + w->inner + "`, not a CPU INT4 weight packer");
  return std::make_shared<CpuInt4Weight>(w->source, role, zero_input(w->source, role, available, layer), w->inner);
}

std::optional<std::string> cpu_int4_refusal(const ckpt::MoeLayer& layer, const oracle::Decision& d) {
  const ckpt::LayerQuant& q = layer.quant;
  const std::string& method = q.method.quant_method;
  const bool awq = method == "auto_awq" || method == "awq" || method == "awq_marlin";
  const bool gptq = method == "auto_gptq" || method == "gptq" || method == "gptq_marlin";
  if (layer.has_bias)
    return "CPUExpertsInt4.apply passes no bias to fused_experts_cpu (w1_bias and w2_bias are None), so the experts' biases would be "
           "ignored: vLLM computes another layer";
  if (awq && !q.may_have_zp)
    return "AutoAWQ without zero points (zero_point false): AutoAWQMoEMethod hands the kernel no w1_zp / w2_zp, which "
           "fused_experts_cpu's INT4 path reads unconditionally, and _process_weights_cpu packs the qzeros parameter, which the "
           "checkpoint does not fill";
  if (q.act_order)
    return "act-order (" + (q.actorder.empty() ? std::string("desc_act") : "actorder " + q.actorder) +
           "): _process_weights_cpu passes g_idx through and the CPU kernel never reads it, so the scale groups would be taken "
           "in input order: vLLM computes another layer";
  if (gptq && q.checkpoint_format == "gptq_v2")
    return "checkpoint_format gptq_v2 stores the zero points themselves, but the CPU unpack (unpack_4bit_to_32bit_signed) adds 1 "
           "to them as for gptq v1: every zero point would be one too high";
  const uint64_t hidden = static_cast<uint64_t>(d.padded_hidden_size), inter = static_cast<uint64_t>(d.padded_intermediate_size);
  const uint64_t n13 = layer.gated ? 2 * inter : inter;
  if (hidden % pk::kCpuInt4BlockN != 0 || n13 % pk::kCpuInt4BlockN != 0)
    return "convert_weight_packed_scale_zp views each expert's [N, K] weight as N/32 blocks of BLOCK_N = 32 outputs; w13 has N = " + std::to_string(n13) +
           " and w2 N = " + std::to_string(hidden) + " (vLLM fails while loading the layer)";
  const int64_t gs = q.group_size;
  // (An intermediate size per rank that splits a group is the WNA16 loader's refusal.)
  if (gs > 0 && hidden % static_cast<uint64_t>(gs) != 0)
    return "group size " + std::to_string(gs) + " does not divide the hidden size " + std::to_string(hidden) +
           ": the op views w13's K inputs as K / G groups, which needs whole groups";
  // The kernel takes one group size for both projections: K / num_groups of w13's scales.
  const uint64_t group13 = gs > 0 ? static_cast<uint64_t>(gs) : hidden, group2 = gs > 0 ? static_cast<uint64_t>(gs) : inter;
  if (group13 != group2)
    return "channel-wise scales: fused_experts_int4_w4a8_kernel_impl derives one group size from w13's scales (K / 1 = " + std::to_string(group13) +
           " inputs) and applies it to w2, whose single group spans its " + std::to_string(group2) + " inputs: vLLM computes another layer";
  const uint64_t block_k = std::min<uint64_t>(group13, 128);
  if (group13 % block_k != 0)
    return "group size " + std::to_string(group13) +
           " is above 128 and no multiple of it: the kernel finds the scale group of a 128-input block "
           "as block / (group_size / 128) (integer division), which is not the block's group: vLLM computes another layer";
  if (block_k != 16 && block_k != 32 && block_k != 64 && block_k != 128)
    return "block_k = min(group size, 128) = " + std::to_string(block_k) + ": this build has the CPU INT4 layouts for block_k 16, 32, 64 and 128 only";
  return std::nullopt;
}

}  // namespace moepack::convert
