// See moe_wna16_awq.h for the drawn layout and the upstream definition.
#include "packers/moe_wna16_awq.h"

namespace moepack::packers {

std::string MoeWna16AwqLayout::name() const {
  return tensor_ == MoeWna16AwqTensor::qweight ? layout_id::moe_wna16_awq_qweight() : layout_id::moe_wna16_awq_qzeros();
}

Accepts MoeWna16AwqLayout::accepts() const {
  Accepts a;
  a.dtypes = Accepts::Dtypes::i32;
  if (tensor_ == MoeWna16AwqTensor::qweight) {
    a.what = "one expert's AutoAWQ int4 qweight [K, N/8] (I32)";
    // convert_awq_tensor packs pairs of input rows into one byte after the transpose.
    a.rows_multiple = 2;
    a.rows_rule = "MoeWNA16's loader packs two input rows per byte (convert_awq_tensor: tensor[:, 1::2] * 16 + tensor[:, ::2])";
  } else {
    a.what = "one expert's AutoAWQ int4 qzeros [G, N/8] (I32)";
  }
  return a;
}

}  // namespace moepack::packers
