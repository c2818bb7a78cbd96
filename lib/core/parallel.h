// Work over an index range on several threads with a result that does not depend on how many
// there are: callers write each index's result into its own slot and combine the slots in index
// order afterwards; an exception is rethrown as the lowest failing index raised it, so the
// error a user sees is the same for any thread count (as a one-thread run would report it).
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <vector>

namespace moepack {

// Calls fn(i) for every i in [0, count), on up to `threads` threads (1: in order on the caller's
// thread). Every index runs even when one fails; then the lowest failing index's exception is
// rethrown. fn must be safe to call concurrently for different indices.
void parallel_for_each_index(uint64_t count, int threads, const std::function<void(uint64_t)>& fn);

}  // namespace moepack
