#include "lib/core/parallel.h"

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

namespace moepack {

void parallel_for_each_index(uint64_t count, int threads, const std::function<void(uint64_t)>& fn) {
  std::vector<std::exception_ptr> failures(static_cast<size_t>(count));
  auto guarded = [&](uint64_t i) {
    try {
      fn(i);
    } catch (...) {
      failures[static_cast<size_t>(i)] = std::current_exception();
    }
  };
  if (threads <= 1 || count <= 1) {
    for (uint64_t i = 0; i < count; ++i) guarded(i);
  } else {
    tbb::task_arena arena(threads);
    arena.execute([&] {
      // Grain 1: the items (an expert's matrices, a layer) are large and uneven.
      tbb::parallel_for(tbb::blocked_range<uint64_t>(0, count, 1), [&](const tbb::blocked_range<uint64_t>& r) {
        for (uint64_t i = r.begin(); i != r.end(); ++i) guarded(i);
      });
    });
  }
  for (const std::exception_ptr& e : failures)
    if (e) std::rethrow_exception(e);
}

}  // namespace moepack
