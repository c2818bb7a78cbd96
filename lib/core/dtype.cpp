#include "lib/core/dtype.h"

#include <array>

namespace moepack {
namespace {

struct DTypeRow {
  std::string_view name;
  int bits;
  bool is_float;
};

constexpr std::array<DTypeRow, kDTypeCount> kRows = {{
    {"BOOL", 8, false},    {"F4", 4, false},           {"F6_E2M3", 6, false},      {"F6_E3M2", 6, false},
    {"U8", 8, false},      {"I8", 8, false},           {"F8_E5M2", 8, true},       {"F8_E4M3", 8, true},
    {"F8_E8M0", 8, false}, {"F8_E4M3FNUZ", 8, true},   {"F8_E5M2FNUZ", 8, true},   {"I16", 16, false},
    {"U16", 16, false},    {"F16", 16, true},          {"BF16", 16, true},         {"I32", 32, false},
    {"U32", 32, false},    {"F32", 32, true},          {"C64", 64, true},          {"F64", 64, true},
    {"I64", 64, false},    {"U64", 64, false},
}};

}  // namespace

int dtype_bits(DType t) { return kRows[static_cast<size_t>(t)].bits; }
std::string_view dtype_name(DType t) { return kRows[static_cast<size_t>(t)].name; }
bool dtype_is_float(DType t) { return kRows[static_cast<size_t>(t)].is_float; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (size_t i = 0; i < kRows.size(); ++i)
    if (kRows[i].name == name) return static_cast<DType>(i);
  return std::nullopt;
}

}  // namespace moepack
