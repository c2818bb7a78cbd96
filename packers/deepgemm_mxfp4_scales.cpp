// DeepGEMM packed-UE8M0 MXFP4 scale layout; the drawn layout and the upstream references are in
// deepgemm_mxfp4_scales.h.
#include "packers/deepgemm_mxfp4_scales.h"

namespace moepack::packers {

std::string DeepGemmMxfp4ScaleLayout::name() const {
  return std::string("deep_gemm.transform_sf_into_required_layout(recipe=") + (recipe_ == DeepGemmRecipe::mxfp4_1x1x32 ? "1x1x32" : "1x128x128") +
         ",sm100,packed_ue8m0,mn_major," + std::string(pins::kDeepGemm) + ")";
}

}  // namespace moepack::packers
