#include "lib/oracle/sizes_layouts.h"

namespace moepack::oracle {

namespace {
int itemsize(FloatType t) { return t == FloatType::float32 ? 4 : 2; }
}  // namespace

int all2all_rounded_hidden(int hidden, FloatType act_dtype, const MoeParallelConfig& p) {
  auto bytes_round = [](int h, int size) {
    const int bytes = h * size;
    // DeepEP copies in units of 32 lanes x 16 bytes.
    return bytes % 512 == 0 ? h : round_up_to(bytes, 512) / size;
  };
  auto table_round = [](int h) {
    static const int kSupported[] = {2048, 2560, 3072, 4096, 5120, 6144, 7168, 8192};
    for (int s : kSupported)
      if (s >= h) return s;
    raise_value_error("Hidden Size " + std::to_string(h) + " is greater than the maximum supported hidden size 8192");
  };
  if (p.use_deepep_ht_kernels()) hidden = bytes_round(hidden, itemsize(act_dtype));
  if (p.use_deepep_ll_kernels()) hidden = table_round(hidden);
  if (p.use_deepep_v2_kernels()) hidden = bytes_round(hidden, itemsize(act_dtype));
  if (p.use_nixl_ep_kernels()) hidden = table_round(hidden);
  return hidden;
}

std::pair<int, int> padded_sizes(const FamilyDescriptor& family, const MethodRow& method, const Selection& s, const SelectionContext& ctx) {
  // 1. Allocation: maybe_roundup_sizes.
  int hidden = all2all_rounded_hidden(ctx.moe.hidden_dim, ctx.deployment.model_dtype, ctx.moe.parallel);
  int inter = ctx.moe.intermediate_size_per_partition;
  if (method.round_up) std::tie(hidden, inter) = method.round_up(ctx, s, hidden, inter);
  // 2. Weight conversion.
  if (family.conversion_padding) return family.conversion_padding(ctx, s, hidden, inter);
  return {hidden, inter};
}

// ---------------------------------------------------------------------------------------------
// Layouts
// ---------------------------------------------------------------------------------------------
namespace {

bool backend_matches(const std::string& pattern, const std::string& backend) {
  if (pattern == "*") return true;
  if (!pattern.empty() && pattern[0] == '*') return backend.size() >= pattern.size() - 1 && backend.compare(backend.size() - (pattern.size() - 1), pattern.size() - 1, pattern.substr(1)) == 0;
  if (!pattern.empty() && pattern.back() == '*') return backend.compare(0, pattern.size() - 1, pattern, 0, pattern.size() - 1) == 0;
  return pattern == backend;
}

// Roles that exist for this layer: biases only with expert biases, input scales only with
// static activation scales, zero points only when the checkpoint carries them, act-order
// tensors only with act-order.
bool role_present(const std::string& role, const SelectionContext& c, const Selection& s) {
  const MoeLayerQuery& q = c.query;
  if (role.find("_bias") != std::string::npos) return q.has_bias;
  if (role.find("_input_scale") != std::string::npos) {
    if (s.backend == "AITER_MXFP4_FP8") return true;
    // QuarkOCP_MX_MoEMethod registers them whenever the checkpoint's scales are static,
    // whichever backend then runs (the CPU one leaves them as loaded).
    if (q.quant_method == "quark") return q.static_input_scales;
    if (c.query.family == Family::nvfp4) return s.activation_key.has_value();
    return s.activation_key && s.activation_key->scale.is_static;
  }
  if (role.find("qzeros") != std::string::npos) return !q.symmetric || q.has_zero_points;
  if (role.find("g_idx") != std::string::npos) return q.desc_act || q.actorder == "group" || q.actorder == "dynamic";
  if (role.find("fc2_input_scale") != std::string::npos) return true;
  return true;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> tensor_layouts(const FamilyDescriptor& family, const Selection& s, const SelectionContext& ctx) {
  for (const LayoutRow& row : family.layouts) {
    if (!backend_matches(row.backend, s.backend) || (row.condition && !row.condition(ctx, s))) continue;
    if (row.roles_of) return row.roles_of(ctx, s);
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& role : row.roles)
      if (role_present(role.first, ctx, s)) out.push_back(role);
    return out;
  }
  return {};
}

std::vector<std::string> listed_layouts(const std::string& family, const std::string& backend, const std::string& role) {
  std::vector<std::string> out;
  for (const FamilyDescriptor* f : family_descriptors()) {
    if (f->name != family) continue;
    for (const LayoutRow& row : f->layouts) {
      if (!backend_matches(row.backend, backend)) continue;
      for (const auto& [r, layout] : row.roles)
        if (r == role) out.push_back(layout);
    }
  }
  return out;
}

std::vector<LayoutListing> layout_catalog() {
  std::vector<LayoutListing> out;
  for (const FamilyDescriptor* family : family_descriptors())
    for (const LayoutRow& row : family->layouts) {
      if (row.roles.empty()) continue;  // rows that keep nothing (none today)
      out.push_back({family->name, row.backend, row.condition_text, row.roles});
    }
  return out;
}

}  // namespace moepack::oracle
