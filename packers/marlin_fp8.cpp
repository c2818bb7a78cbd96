// See marlin_fp8.h for the drawn layout and the upstream definition.
#include "packers/marlin_fp8.h"

namespace moepack::packers {

std::string Fp8AsGptqInt32Layout::name() const { return layout_id::pack_fp8_to_int32(); }

Accepts Fp8AsGptqInt32Layout::accepts() const {
  Accepts a;
  a.dtypes = Accepts::Dtypes::one_byte;
  a.what = "one expert's F8_E4M3 weight [N, K]";
  a.last_multiple = 4;
  a.last_rule = "pack_fp8_to_int32 views four K bytes as one int32 (K % 4 == 0)";
  return a;
}

}  // namespace moepack::packers
