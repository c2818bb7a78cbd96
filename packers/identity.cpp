#include "packers/identity.h"

namespace moepack::packers {

Accepts UnchangedLayout::accepts() const {
  Accepts a;
  a.dtypes = Accepts::Dtypes::any;
  a.ranks = Accepts::kAnyRank;
  a.allows_empty = true;  // a parameter vLLM keeps as loaded may be anything, even empty
  return a;
}

}  // namespace moepack::packers
