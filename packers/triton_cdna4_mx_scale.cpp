// See triton_cdna4_mx_scale.h for the drawn layout and the upstream definition.
#include "packers/triton_cdna4_mx_scale.h"

namespace moepack::packers {

std::string TritonCdna4MXScaleLayout::name() const {
  return layout_id::cdna4_mx_scale();
}

Accepts TritonCdna4MXScaleLayout::accepts() const {
  Accepts a;
  a.rows_multiple = kRowBlock;
  a.rows_rule = "N must be a multiple of 32";
  a.last_multiple = kGroupBlock;
  a.last_rule = "scale groups K/32 must be a multiple of 8";
  return a;
}

}  // namespace moepack::packers
