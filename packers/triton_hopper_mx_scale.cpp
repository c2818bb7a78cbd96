// See triton_hopper_mx_scale.h for the drawn layout and the upstream definition.
#include "packers/triton_hopper_mx_scale.h"

#include "packers/triton_common.h"

namespace moepack::packers {
namespace {

// vLLM e9d1398d9 pads the scale groups to a multiple of 4 on SM90 (a workaround it carries
// until triton_kernels 3.8); the layout's own K alignment (2) is then already met.
constexpr uint64_t kVllmGroupPad = 4;

struct Geometry {
  uint64_t rows, groups;               // canonical N, Ks
  uint64_t padded_rows, padded_groups; // Np, Ksp
  uint64_t warps;
  uint64_t out_rows() const { return padded_rows / 32; }
  uint64_t out_cols() const { return padded_groups * 32; }
};

}  // namespace

TritonHopperMXScaleLayout::TritonHopperMXScaleLayout(uint64_t num_warps) : num_warps_(num_warps) {
  // triton_kernels asserts a power of two; vLLM uses 8 (default) and, historically, 4.
  if (num_warps_ != 4 && num_warps_ != 8)
    throw_internal("TritonHopperMXScaleLayout: num_warps must be 4 or 8, got " + std::to_string(num_warps_));
}

std::string TritonHopperMXScaleLayout::name() const {
  return "triton_kernels.HopperMXScale(mx_axis=1,num_warps=" + std::to_string(num_warps_) +
         ",k_groups_pad=4," + std::string(detail::kTritonKernelsVersion) + ")";
}

static Geometry geometry(const std::string& layout, DType dtype, std::span<const uint64_t> shape, uint64_t warps) {
  detail::Matrix m = detail::expect_byte_matrix(layout, dtype, shape);
  return {m.rows, m.cols, detail::round_up(m.rows, 32 * warps), detail::round_up(m.cols, kVllmGroupPad), warps};
}

std::vector<uint64_t> TritonHopperMXScaleLayout::packed_shape(std::span<const uint64_t> canonical_shape) const {
  Geometry g = geometry(name(), DType::U8, canonical_shape, num_warps_);
  return {g.out_rows(), g.out_cols()};
}

uint64_t TritonHopperMXScaleLayout::packed_offset(std::span<const uint64_t> canonical_shape, uint64_t n, uint64_t k) const {
  const uint64_t W = num_warps_, A = 32 * W;
  const uint64_t m0 = n / A, a = n / (16 * W) % 2, w = n / 16 % W, b = n / 8 % 2, r = n % 8;
  const uint64_t k2 = k / 2, c = k % 2;
  const uint64_t out_cols = detail::round_up(canonical_shape[1], kVllmGroupPad) * 32;
  return (W * m0 + w) * out_cols + 64 * k2 + 32 * a + 4 * r + 2 * c + b;
}

namespace {

// Visits the storage in order; fn(out_offset, n, k) for every byte, padding included.
template <class Fn>
void for_each_byte(const Geometry& g, Fn&& fn) {
  const uint64_t W = g.warps;
  uint64_t out = 0;
  for (uint64_t m0 = 0; m0 < g.padded_rows / (32 * W); ++m0)
    for (uint64_t w = 0; w < W; ++w)
      for (uint64_t k2 = 0; k2 < g.padded_groups / 2; ++k2)
        for (uint64_t a = 0; a < 2; ++a)
          for (uint64_t r = 0; r < 8; ++r)
            for (uint64_t c = 0; c < 2; ++c)
              for (uint64_t b = 0; b < 2; ++b, ++out) fn(out, 32 * W * m0 + 16 * W * a + 16 * w + 8 * b + r, 2 * k2 + c);
}

}  // namespace

void TritonHopperMXScaleLayout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  const Geometry g = geometry(name(), canonical.dtype, canonical.shape, num_warps_);
  detail::expect_bytes(name(), "canonical", canonical.bytes.size(), g.rows * g.groups);
  detail::expect_bytes(name(), "packed", packed.size(), g.out_rows() * g.out_cols());
  const uint8_t* s = canonical.bytes.data();
  for_each_byte(g, [&](uint64_t out, uint64_t n, uint64_t k) {
    packed[out] = n < g.rows && k < g.groups ? s[n * g.groups + k] : uint8_t{0};
  });
}

void TritonHopperMXScaleLayout::unpack(std::span<const uint8_t> packed, OwnedTensor& canonical) const {
  const Geometry g = geometry(name(), canonical.dtype, canonical.shape, num_warps_);
  detail::expect_bytes(name(), "canonical", canonical.bytes.size(), g.rows * g.groups);
  detail::expect_bytes(name(), "packed", packed.size(), g.out_rows() * g.out_cols());
  uint8_t* s = canonical.bytes.data();
  for_each_byte(g, [&](uint64_t out, uint64_t n, uint64_t k) {
    if (n < g.rows && k < g.groups) s[n * g.groups + k] = packed[out];
  });
}

}  // namespace moepack::packers
