#include "lib/convert/param_loader.h"

#include <algorithm>
#include <map>
#include <cstring>
#include <optional>

#include "lib/convert/fp8_prepare.h"
#include "lib/convert/wna16_marlin.h"
#include "lib/core/error.h"

namespace moepack::convert {

void copy_param_elements(const OwnedTensor& src, uint64_t src_at, OwnedTensor& dst, uint64_t dst_at, uint64_t count, uint64_t element_bytes,
                         const std::string& role) {
  if (count == 0) return;
  if ((src_at + count) * element_bytes > src.bytes.size() || (dst_at + count) * element_bytes > dst.bytes.size())
    throw_internal("param loader: " + role + ": " + std::to_string(count) + " elements from " + std::to_string(src_at) + " of " + shape_string(src.shape) +
                   " to " + std::to_string(dst_at) + " of " + shape_string(dst.shape) + " do not fit");
  std::memcpy(dst.bytes.data() + dst_at * element_bytes, src.bytes.data() + src_at * element_bytes, static_cast<size_t>(count * element_bytes));
}

namespace {

uint64_t element_bytes(const OwnedTensor& t) {
  int bits = dtype_bits(t.dtype);
  if (bits % 8 != 0) throw_internal("param loader: sub-byte dtype " + std::string(dtype_name(t.dtype)) + " must be stored as U8 bytes");
  return static_cast<uint64_t>(bits / 8);
}

// Storage units holding `logical` elements of a dim whose `total_logical` elements take `stored`
// units. The ratio need not be whole: FP4 packs 2 elements per byte, FP6 4 per 3 bytes, E8M0
// scales 1 per 32 elements. A count that does not land on a unit boundary is a planning bug.
uint64_t storage_units(uint64_t logical, uint64_t stored, uint64_t total_logical, const std::string& role) {
  const bool whole_elements_per_unit = stored != 0 && total_logical % stored == 0;
  const bool fp6_bytes = stored * 4 == total_logical * 3;
  if (!whole_elements_per_unit && !fp6_bytes)
    throw_internal("param loader: " + role + " has " + std::to_string(stored) + " storage units for " + std::to_string(total_logical) + " elements");
  if (total_logical == 0 || (logical * stored) % total_logical != 0)
    throw_internal("param loader: " + std::to_string(logical) + " of the " + std::to_string(total_logical) + " elements of " + role +
                   " (held in " + std::to_string(stored) + " storage units) do not end on a storage unit");
  return logical * stored / total_logical;
}

// Copies src[row0 + r, col0 + c] to dst[drow0 + r, c] for r < nrows, c < ncols (elements of `eb` bytes).
void copy_block(const OwnedTensor& src, uint64_t src_cols, uint64_t row0, uint64_t col0, OwnedTensor& dst, uint64_t dst_cols,
                uint64_t drow0, uint64_t nrows, uint64_t ncols, uint64_t eb, const std::string& role) {
  if (col0 + ncols > src_cols || ncols > dst_cols)
    throw_internal("param loader: " + role + ": columns [" + std::to_string(col0) + ", " + std::to_string(col0 + ncols) + ") of " + shape_string(src.shape) +
                   " do not fit rows of " + std::to_string(dst_cols) + " in " + shape_string(dst.shape));
  for (uint64_t r = 0; r < nrows; ++r) copy_param_elements(src, (row0 + r) * src_cols + col0, dst, (drow0 + r) * dst_cols, ncols, eb, role);
}

// FusedMoE's narrowing: floor(n/tp) per rank, clipped; nullopt when the rank gets nothing.
struct Slice {
  uint64_t begin, size;
};
std::optional<Slice> generic_slice(uint64_t n, const RankGeometry& g) {
  uint64_t per_rank = n / g.tp_size;
  uint64_t begin = per_rank * g.tp_rank;
  if (begin >= n) return std::nullopt;
  return Slice{begin, std::min(per_rank, n - begin)};
}

}  // namespace

IntermediateRange gpt_oss_rank_range(const RankGeometry& g) {
  constexpr uint64_t kBlock = 32;
  const uint64_t per_rank = g.gpt_oss_mx_blocks ? (g.intermediate / kBlock + g.tp_size - 1) / g.tp_size * kBlock
                                                : (g.intermediate + g.tp_size - 1) / g.tp_size;
  uint64_t begin = std::min(g.tp_rank * per_rank, g.intermediate);
  return {begin, std::min(begin + per_rank, g.intermediate)};
}

namespace {

// normalize_e4m3fn_to_e4m3fnuz's weight half (w8a8_utils.py @ e9d1398d9): the weight's int8
// view has -128 set to 0, then the bytes are read as E4M3FNUZ (its scales: load_fp8_scale).
//
// compressed-tensors' weight_shape ([2] integers per expert) goes into a parameter made with
// torch.empty(num_experts, 2) while the model dtype is torch's default (DefaultModelLoader's
// set_default_torch_dtype): vLLM holds it as a float of the model dtype, rounded like torch's
// integer-to-float copy (RNE). Nothing reads it afterwards; it is kept as vLLM keeps it.
OwnedTensor held_on_device(const std::string& role, OwnedTensor t, const RankGeometry& g) {
  if (role.ends_with("weight_shape") && (t.dtype == DType::I64 || t.dtype == DType::I32)) {
    OwnedTensor f32(DType::F32, t.shape);
    const std::vector<int64_t> v = integer_values(t);
    for (size_t i = 0; i < v.size(); ++i) {
      const float x = static_cast<float>(v[i]);
      std::memcpy(f32.bytes.data() + 4 * i, &x, 4);
    }
    return cast_float_tensor(f32, g.params_dtype);
  }
  if (!g.fp8_fnuz || t.dtype != DType::F8_E4M3 || (role != "w13_weight" && role != "w2_weight")) return t;
  for (uint8_t& b : t.bytes)
    if (b == 0x80) b = 0x00;
  t.dtype = DType::F8_E4M3FNUZ;
  return t;
}

OwnedTensor sliced_param(const std::string& role, const OwnedTensor& in, const RankGeometry& g) {
  if (g.int_transposed) return load_wna16_param(role, in, g);
  if (g.fp8_scales && is_fp8_scale_role(role)) return load_fp8_scale(role, in, g);
  const bool is_w13 = role.rfind("w13_", 0) == 0;
  const bool is_w2 = role.rfind("w2_", 0) == 0;
  if (!is_w13 && !is_w2) throw_internal("param loader: unknown role " + role);
  const uint64_t I = g.intermediate, H = g.hidden, P = g.padded_intermediate, Hp = g.padded_hidden;
  const uint64_t eb = element_bytes(in);

  if (in.shape.size() <= 1 && (in.shape.empty() || in.shape[0] <= 2) && role.find("bias") == std::string::npos) {
    return in;  // a per-expert scalar (global or input scale): nothing to slice or pad
  }

  if (in.shape.size() == 1) {  // biases
    uint64_t n = in.shape[0];
    if (is_w13 && !g.gated) {
      if (n != I) throw_internal("param loader: " + role + " has " + std::to_string(n) + " entries, expected I (non-gated)");
      OwnedTensor out(in.dtype, {P});
      if (auto s = generic_slice(I, g)) copy_block(in, n, 0, s->begin, out, P, 0, 1, s->size, eb, role);
      return out;
    }
    if (is_w13) {
      if (n != 2 * I) throw_internal("param loader: " + role + " has " + std::to_string(n) + " entries, expected 2I");
      OwnedTensor out(in.dtype, {2 * P});
      if (g.gpt_oss_interleaved) {
        IntermediateRange r = gpt_oss_rank_range(g);
        copy_block(in, n, 0, 2 * r.begin, out, 2 * P, 0, 1, 2 * (r.end - r.begin), eb, role);
      } else if (auto s = generic_slice(I, g)) {
        copy_param_elements(in, s->begin, out, 0, s->size, eb, role);      // gate half
        copy_param_elements(in, I + s->begin, out, P, s->size, eb, role);  // up half
      }
      return out;
    }
    if (n != H) throw_internal("param loader: " + role + " has " + std::to_string(n) + " entries, expected H");
    OwnedTensor out(in.dtype, {Hp});
    if (!g.w2_bias_first_rank_only || g.tp_rank == 0) copy_param_elements(in, 0, out, 0, H, eb, role);
    return out;
  }

  if (in.shape.size() != 2) throw_internal("param loader: " + role + " is not 2-D");
  const uint64_t rows = in.shape[0], cols = in.shape[1];
  if (is_w13 && !g.gated) {
    // A non-gated layer's w13 is the up projection alone: one half, sliced like FusedMoE's w1.
    if (rows != I) throw_internal("param loader: " + role + " has " + std::to_string(rows) + " rows, expected I = " + std::to_string(I) + " (non-gated)");
    const uint64_t out_cols = storage_units(Hp, cols, H, role);
    OwnedTensor out(in.dtype, {P, out_cols});
    if (auto s = generic_slice(I, g)) copy_block(in, cols, s->begin, 0, out, out_cols, 0, s->size, cols, eb, role);
    return out;
  }
  if (is_w13) {
    if (rows != 2 * I) throw_internal("param loader: " + role + " has " + std::to_string(rows) + " rows, expected 2I = " + std::to_string(2 * I));
    const uint64_t out_cols = storage_units(Hp, cols, H, role);
    OwnedTensor out(in.dtype, {2 * P, out_cols});
    if (g.gpt_oss_interleaved) {
      IntermediateRange r = gpt_oss_rank_range(g);
      copy_block(in, cols, 2 * r.begin, 0, out, out_cols, 0, 2 * (r.end - r.begin), cols, eb, role);
    } else if (auto s = generic_slice(I, g)) {
      copy_block(in, cols, s->begin, 0, out, out_cols, 0, s->size, cols, eb, role);      // gate -> rows [0, n)
      copy_block(in, cols, I + s->begin, 0, out, out_cols, P, s->size, cols, eb, role);  // up -> rows [P, P+n)
    }
    return out;
  }
  // w2: [H, I in storage units], sharded along the input (intermediate) dim.
  if (rows != H) throw_internal("param loader: " + role + " has " + std::to_string(rows) + " rows, expected H = " + std::to_string(H));
  // P counts intermediate elements of this rank; `cols` storage units hold all I of them.
  const uint64_t out_cols = storage_units(P, cols, I, role);
  OwnedTensor out(in.dtype, {Hp, out_cols});
  if (g.gpt_oss_interleaved) {
    IntermediateRange r = gpt_oss_rank_range(g);
    copy_block(in, cols, 0, storage_units(r.begin, cols, I, role), out, out_cols, 0, H, storage_units(r.end - r.begin, cols, I, role), eb, role);
  } else if (auto s = generic_slice(cols, g)) {
    copy_block(in, cols, 0, s->begin, out, out_cols, 0, H, s->size, eb, role);
  }
  return out;
}

}  // namespace

OwnedTensor load_expert_param(const std::string& role, const OwnedTensor& in, const RankGeometry& g) {
  return held_on_device(role, sliced_param(role, in, g), g);
}

OwnedTensor load_expert_param(const std::string& role, OwnedTensor&& canonical, const RankGeometry& g) {
  // One rank and no round-up: every branch above copies the whole tensor, element for element,
  // into a parameter of the same dtype and shape (param_loader_test checks it on every role).
  // Shapes those branches would refuse still go through them, for their message.
  const bool is_w13 = role.rfind("w13_", 0) == 0;
  // FP8 / INT8 scales are widened to fp32 parameters: never moved.
  const bool widened = g.fp8_scales && is_fp8_scale_role(role);
  const bool whole = !g.int_transposed && !widened && g.tp_size == 1 && g.tp_rank == 0 && g.padded_intermediate == g.intermediate &&
                     g.padded_hidden == g.hidden && (is_w13 || role.rfind("w2_", 0) == 0);
  const std::vector<uint64_t>& shape = canonical.shape;
  const uint64_t rows = is_w13 ? (g.gated ? 2 * g.intermediate : g.intermediate) : g.hidden;  // w13 / w2 rows, or bias entries
  const uint64_t input = is_w13 ? g.hidden : g.intermediate;                                     // logical columns
  const bool scalar = shape.size() <= 1 && (shape.empty() || shape[0] <= 2) && role.find("bias") == std::string::npos;
  const bool same_shape = scalar || (shape.size() == 1 && shape[0] == rows) ||
                          (shape.size() == 2 && shape[0] == rows && shape[1] != 0 && (input % shape[1] == 0 || shape[1] * 4 == input * 3));
  if (whole && same_shape) return held_on_device(role, std::move(canonical), g);
  return load_expert_param(role, static_cast<const OwnedTensor&>(canonical), g);
}

namespace {

// vLLM renames compressed-tensors' NVFP4 params in process_weights_after_loading
// (w13_weight_packed -> w13_weight, 1 / w13_weight_global_scale -> w13_weight_scale_2, ...):
// the artifact holds the final names, read from these.
const std::map<std::string, std::string>& renamed_sources() {
  static const std::map<std::string, std::string> m = {
      {"w13_weight", "w13_weight_packed"},           {"w2_weight", "w2_weight_packed"},
      {"w13_weight_scale_2", "w13_weight_global_scale"}, {"w2_weight_scale_2", "w2_weight_global_scale"},
      {"w13_input_scale", "w13_input_global_scale"}, {"w2_input_scale", "w2_input_global_scale"}};
  return m;
}

}  // namespace

std::string loaded_param_name(const std::set<std::string>& available, const std::string& role) {
  if (available.count(role)) return role;
  auto it = renamed_sources().find(role);
  return it != renamed_sources().end() && available.count(it->second) ? it->second : "";
}

std::string source_param_of(const ckpt::MoeLayer& layer, const std::string& role) {
  std::set<std::string> available;
  for (const auto& p : layer.params) available.insert(p.name);
  const std::string s = loaded_param_name(available, role);
  return s.empty() ? role : s;
}

ReductionInput reduction_input(const ckpt::Checkpoint& checkpoint, const ckpt::MoeLayer& layer, const std::string& role, const RankGeometry& g,
                               uint64_t first_expert, uint64_t local_experts, const SwigluFacts& swiglu) {
  const ckpt::Checkpoint* ck = &checkpoint;
  const ckpt::MoeLayer* lay = &layer;
  ReductionInput in;
  in.role = role;
  in.local_experts = local_experts;
  in.swiglu_limit = swiglu.limit;
  in.swiglu_beta = swiglu.beta;
  in.has = [lay](const std::string& r) { return std::any_of(lay->params.begin(), lay->params.end(), [&](const auto& p) { return p.name == r; }); };
  in.each = [ck, lay, g, first_expert, local_experts](const std::string& r, bool whole_layer, const std::function<void(uint64_t, const OwnedTensor&)>& fn) {
    const uint64_t begin = whole_layer ? 0 : first_expert, end = whole_layer ? lay->num_experts : first_expert + local_experts;
    for (uint64_t e = begin; e < end; ++e) {
      ckpt::ExpertParams params = ckpt::read_expert_params(*ck, *lay, e, r);
      auto it = params.tensors.find(r);
      if (it == params.tensors.end()) throw_internal("expert " + std::to_string(e) + " of " + lay->prefix + " has no " + r);
      fn(e, load_expert_param(r, it->second, g));
    }
  };
  in.first_expert = first_expert;
  in.where = [lay](const std::string& r, uint64_t e) { return lay->prefix + ", expert " + std::to_string(e) + ", " + r; };
  return in;
}

bool uses_gpt_oss_mx_block_loader(const ckpt::MoeLayer& layer, const std::string& family) {
  // gpt_oss.py @ e9d1398d9: `_load_weights_mxfp4` (openai MXFP4), and `_load_weights_quark` when
  // the weight dtype names mxfp4 (amd-quark MXFP4 exports; FP6 and FP8 weights take cdiv(I, tp)).
  return layer.recipe.w13_order == ckpt::W13Order::interleaved && family == "mxfp4" && layer.quant.weight_bits == 4;
}

void set_family_geometry(RankGeometry& g, const ckpt::MoeLayer& layer, const std::string& family, DType params_dtype, bool fp8_fnuz_device) {
  g.w2_bias_first_rank_only = layer.recipe.w2_bias_first_rank_only;
  g.gpt_oss_mx_blocks = uses_gpt_oss_mx_block_loader(layer, family);
  if (family == "wna16") set_wna16_geometry(g, layer, params_dtype);
  if (family == "int8") g.fp8_scales = true;  // per-channel fp32 scales, loaded like FP8's
  if (family == "w4a8") g.params_dtype = params_dtype;  // bf16 group-scale parameters (w4a8_cutlass.h)
  if (family == "fp8") {
    g.fp8_scales = true;
    g.fp8_fnuz = fp8_fnuz_device;
    if (layer.quant.weight_block_size.size() == 2) {
      g.fp8_block_n = static_cast<uint64_t>(layer.quant.weight_block_size[0]);
      g.fp8_block_k = static_cast<uint64_t>(layer.quant.weight_block_size[1]);
    }
  }
}

bool holds_fp8_fnuz(const artifact::Layer& layer) {
  for (const auto& rank : layer.ranks)
    for (const auto& [role, t] : rank.tensors)
      if (t.canonical_dtype == "F8_E4M3FNUZ") return true;
  return false;
}

}  // namespace moepack::convert
