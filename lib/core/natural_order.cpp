#include "lib/core/natural_order.h"

#include <algorithm>
#include <cctype>

namespace moepack {
namespace {

bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

// -1, 0 or 1 as a is before, level with or after b when digit runs count as numbers.
int natural_compare(std::string_view a, std::string_view b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const bool da = is_digit(a[i]), db = is_digit(b[j]);
    if (da && db) {
      size_t ie = i, je = j;
      while (ie < a.size() && is_digit(a[ie])) ++ie;
      while (je < b.size() && is_digit(b[je])) ++je;
      std::string_view na = a.substr(i, ie - i), nb = b.substr(j, je - j);
      while (na.size() > 1 && na.front() == '0') na.remove_prefix(1);
      while (nb.size() > 1 && nb.front() == '0') nb.remove_prefix(1);
      if (na.size() != nb.size()) return na.size() < nb.size() ? -1 : 1;
      if (na != nb) return na < nb ? -1 : 1;
      i = ie;
      j = je;
      continue;
    }
    // Python refuses to compare an int with a str in a key tuple; digits first is the common case.
    if (da != db) return da ? -1 : 1;
    if (a[i] != b[j]) return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[j]) ? -1 : 1;
    ++i;
    ++j;
  }
  const size_t left_a = a.size() - i, left_b = b.size() - j;
  return left_a == left_b ? 0 : (left_a < left_b ? -1 : 1);
}

bool all_digits(std::string_view text) {
  if (text.empty()) return false;
  for (char c : text)
    if (!is_digit(c)) return false;
  return true;
}

// -1, 0 or 1 for two digit strings as numbers (leading zeros aside).
int compare_numbers(std::string_view a, std::string_view b) {
  while (a.size() > 1 && a.front() == '0') a.remove_prefix(1);
  while (b.size() > 1 && b.front() == '0') b.remove_prefix(1);
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  return a == b ? 0 : (a < b ? -1 : 1);
}

}  // namespace

bool module_path_less(std::string_view a, std::string_view b) {
  size_t i = 0;  // a and b agree before i, and i starts a component in both
  while (true) {
    const size_t end_a = std::min(a.find('.', i), a.size()), end_b = std::min(b.find('.', i), b.size());
    const std::string_view part_a = a.substr(i, end_a - i), part_b = b.substr(i, end_b - i);
    if (all_digits(part_a) && all_digits(part_b)) {
      if (const int order = compare_numbers(part_a, part_b); order != 0) return order < 0;
    }
    // The first component that differs (other than as numbers) decides in plain byte order,
    // from where the names part.
    if (part_a != part_b || end_a == a.size() || end_b == b.size()) return a.substr(i) < b.substr(i);
    i = end_a + 1;
  }
}

bool natural_less(std::string_view a, std::string_view b) {
  const int order = natural_compare(a, b);
  return order != 0 ? order < 0 : a < b;
}

}  // namespace moepack
