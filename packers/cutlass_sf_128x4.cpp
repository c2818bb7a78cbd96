// vLLM's CUTLASS W4A4 MXFP4 scale layout; the drawn layout and the upstream references are in
// cutlass_sf_128x4.h.
#include "packers/cutlass_sf_128x4.h"

namespace moepack::packers {

std::string CutlassMxfp4ScaleSwizzleLayout::name() const {
  return layout_id::cutlass_swizzle_mxfp4_scales();
}

Accepts CutlassMxfp4ScaleSwizzleLayout::accepts() const {
  const std::string rule =
      "vLLM's CUTLASS W4A4 MXFP4 MoE needs N % 128 == 0 and (K/32) % 4 == 0 (the swizzled expert is reshaped back to "
      "[N, K/32])";
  Accepts a;
  a.rows_multiple = 128;
  a.rows_rule = rule;
  a.last_multiple = 4;
  a.last_rule = rule;
  return a;
}

}  // namespace moepack::packers
