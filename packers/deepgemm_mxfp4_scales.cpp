// DeepGEMM packed-UE8M0 MXFP4 scale layout; the drawn layout and the upstream references are in
// deepgemm_mxfp4_scales.h.
#include "packers/deepgemm_mxfp4_scales.h"

namespace moepack::packers {

std::string DeepGemmMxfp4ScaleLayout::name() const {
  return layout_id::deep_gemm_transform_sf(recipe_ == DeepGemmRecipe::mxfp4_1x1x32 ? "1x1x32" : "1x128x128");
}

}  // namespace moepack::packers
