#include "lib/convert/cpu_int8.h"

#include <cstring>

#include "lib/core/error.h"
#include "lib/core/layout_ids.h"
#include "packers/cpu_sgl_mxfp4.h"
#include "packers/registry.h"

namespace moepack::convert {
namespace {

// The compensation is computed from the weight, which then goes through the INT8 pack.
const std::string kId = layout_id::pipeline({layout_id::cpu_sgl_s8s8_compensation(), layout_id::cpu_sgl_int8_weight});

class CpuInt8Packed final : public ExpertDerivation {
 public:
  explicit CpuInt8Packed(std::string role) : role_(std::move(role)) {}
  std::string name() const override { return kId; }
  std::vector<std::string> inputs() const override { return {role_}; }
  DType dtype() const override { return DType::I8; }
  std::vector<uint64_t> slab_shape(std::span<const OwnedTensor> in, const RankGeometry&) const override { return layout_.packed_shape(in[0].shape); }
  void produce(std::span<const OwnedTensor> in, const RankGeometry&, std::span<uint8_t> out, const std::string& what) const override {
    const OwnedTensor& w = in[0];
    if (w.dtype != DType::I8) throw Error(ErrorKind::bad_input, what + " " + role_ + ": the CPU INT8 pack takes I8 weights, got " + std::string(dtype_name(w.dtype)));
    layout_.pack(w.view(), out);
    const uint64_t rows = w.shape[0], k = w.shape[1], block = packers::kSglBlockN;
    for (uint64_t nb = 0; nb < rows / block; ++nb)
      for (uint64_t n = 0; n < block; ++n) {
        int32_t sum = 0;
        const auto* row = reinterpret_cast<const int8_t*>(w.bytes.data() + (nb * block + n) * k);
        for (uint64_t c = 0; c < k; ++c) sum += 128 * static_cast<int32_t>(row[c]);
        std::memcpy(out.data() + nb * block * (k + 4) + block * k + 4 * n, &sum, 4);
      }
  }

 private:
  std::string role_;
  packers::CpuSglVnni4Int8Layout layout_;
};

}  // namespace

std::shared_ptr<const ExpertDerivation> make_cpu_int8_packed(const std::string& role, const std::string& layout_id) {
  if (layout_id != kId) return nullptr;
  return std::make_shared<CpuInt8Packed>(role);
}

}  // namespace moepack::convert
