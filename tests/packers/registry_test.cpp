// The layout registry: every row builds a layout named by its id, ids are unique, unknown ids
// are refused, and " | " pipelines compose stages (checked against running them one by one).
#include "packers/registry.h"

#include <gtest/gtest.h>

#include <set>

#include "lib/core/error.h"
#include "tests/packers/triton_reference_ops.h"

namespace moepack::packers {
namespace {

TEST(LayoutRegistry, EveryRowBuildsALayoutNamedByItsId) {
  ASSERT_FALSE(layout_table().empty());
  std::set<std::string> seen;
  for (const LayoutRow& row : layout_table()) {
    SCOPED_TRACE(std::string(row.id));
    EXPECT_TRUE(seen.insert(std::string(row.id)).second) << "duplicate id";
    EXPECT_FALSE(row.summary.empty());
    std::unique_ptr<Layout> layout = make_layout(row.id);
    ASSERT_NE(layout, nullptr);
    EXPECT_EQ(layout->name(), row.id);
    EXPECT_EQ(find_layout(row.id), &row);
    EXPECT_EQ(row.id.find(kPipelineSeparator), std::string_view::npos) << "a row id must not look like a pipeline";
  }
  EXPECT_EQ(layout_ids().size(), layout_table().size());
}

TEST(LayoutRegistry, TheTritonAndCpuLayoutsAreRegistered) {
  for (const char* id : {"triton_kernels.Strided(v3.5.1)", "triton_kernels.Strided(k_groups_pad=4,v3.5.1)",
                         "triton_kernels.HopperMXValue(mx_axis=1,v3.5.1)",
                         "triton_kernels.HopperMXScale(mx_axis=1,num_warps=8,k_groups_pad=4,v3.5.1)",
                         "triton_kernels.HopperMXScale(mx_axis=1,num_warps=4,k_groups_pad=4,v3.5.1)",
                         "triton_kernels.BlackwellMXValue(v3.5.1)", "triton_kernels.BlackwellMXScale(v3.5.1)",
                         "triton_kernels.CDNA4MXScale(v3.5.1)", "vllm.mxfp4_triton_shuffle_weight(e9d1398d9)",
                         "cpu.sgl_convert_weight_packed(mxfp4)", "cpu.sgl_convert_scale_packed(e8m0)", "vllm.bias_f32"})
    EXPECT_NE(find_layout(id), nullptr) << id;
}

TEST(LayoutRegistry, UnknownIdIsAnInternalErrorNamingIt) {
  EXPECT_EQ(find_layout("no.such.layout"), nullptr);
  try {
    make_layout("no.such.layout");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::internal);
    EXPECT_NE(std::string(e.what()).find("no.such.layout"), std::string::npos);
  }
  EXPECT_THROW(make_layout("vllm.bias_f32 | no.such.layout"), Error);
}

TEST(LayoutRegistry, PipelineEqualsTheStagesRunOneAfterTheOther) {
  // The generic converter's TRITON path on SM90: shuffle_weight, then HopperMXValue.
  const std::string id = "vllm.mxfp4_triton_shuffle_weight(e9d1398d9) | triton_kernels.HopperMXValue(mx_axis=1,v3.5.1)";
  std::unique_ptr<Layout> pipeline = make_layout(id);
  EXPECT_EQ(pipeline->name(), id);
  const std::vector<uint64_t> shape{34, 48};
  EXPECT_EQ(pipeline->packed_shape(shape), make_layout("triton_kernels.HopperMXValue(mx_axis=1,v3.5.1)")->packed_shape(shape));

  const OwnedTensor canonical = testing::random_tensor(DType::U8, shape, 7);
  const std::vector<uint8_t> shuffled = testing::pack_all(*make_layout("vllm.mxfp4_triton_shuffle_weight(e9d1398d9)"), canonical);
  OwnedTensor shuffled_tensor(DType::U8, shape);
  shuffled_tensor.bytes = shuffled;
  const std::vector<uint8_t> expected =
      testing::pack_all(*make_layout("triton_kernels.HopperMXValue(mx_axis=1,v3.5.1)"), shuffled_tensor);
  EXPECT_EQ(testing::pack_all(*pipeline, canonical), expected);
  testing::expect_round_trip(*pipeline, DType::U8, shape, 8);
}

TEST(LayoutRegistry, PipelineChangesDtypeAndKeepsTheLastStagesParameterShape) {
  // The w13 bias of the generic TRITON path: cast to f32, then shuffle the halves.
  std::unique_ptr<Layout> bias = make_layout("vllm.bias_f32 | vllm.mxfp4_triton_shuffle_weight(e9d1398d9)");
  EXPECT_EQ(bias->packed_dtype(DType::BF16), DType::F32);
  const std::vector<uint64_t> bias_shape{6};
  EXPECT_EQ(bias->packed_shape(bias_shape), (std::vector<uint64_t>{6}));
  testing::expect_round_trip(*bias, DType::BF16, {6}, 9);

  // Blackwell scales report vLLM's [1, E*Np/128, Kp/4, 2, 256] through a pipeline too.
  std::unique_ptr<Layout> scale = make_layout("vllm.mxfp4_triton_shuffle_weight(e9d1398d9) | triton_kernels.BlackwellMXScale(v3.5.1)");
  const std::vector<uint64_t> scale_shape{200, 6};
  EXPECT_EQ(scale->parameter_shape(3, scale_shape), (std::vector<uint64_t>{1, 6, 2, 2, 256}));
}

}  // namespace
}  // namespace moepack::packers
