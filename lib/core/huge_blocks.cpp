#include "lib/core/huge_blocks.h"

#include <array>
#include <cstdint>
#include <mutex>
#include <new>

#include <sys/mman.h>

namespace moepack::huge_blocks {
namespace {

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// The bookkeeping allocates nothing: it runs inside operator new and delete, where an allocation
// could come back here (a small node's address may happen to be 2 MiB aligned) while the lock is
// held. A full table simply sends further requests to the ordinary allocator.
constexpr size_t kSlots = 4096;

struct Slot {
  void* block = nullptr;  // nullptr: free slot
  size_t bytes = 0;       // the mapping's length
  bool live = false;      // handed out (else cached)
  uint64_t released_at = 0;
};

struct Pool {
  std::mutex mutex;
  std::array<Slot, kSlots> slots{};
  uint64_t clock = 0;
  Stats stats;
};

Pool& pool() {
  // Never destroyed: operator delete may run during static destruction, after a pool with a
  // destructor would be gone.
  alignas(Pool) static unsigned char storage[sizeof(Pool)];
  static Pool* p = new (storage) Pool;
  return *p;
}

// An anonymous mapping of `bytes` (a multiple of kHugePage) starting on a kHugePage boundary:
// map one huge page more than needed and cut the misaligned ends off.
void* map_aligned(size_t bytes) {
  const size_t span = bytes + kHugePage;
  void* raw = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = round_up(begin, kHugePage);
  if (aligned > begin) ::munmap(raw, aligned - begin);
  const uintptr_t end = begin + span, used_end = aligned + bytes;
  if (end > used_end) ::munmap(reinterpret_cast<void*>(used_end), end - used_end);
  void* block = reinterpret_cast<void*>(aligned);
  // Advice only: where THP is off the block is still valid, in 4 KiB pages.
  ::madvise(block, bytes, MADV_HUGEPAGE);
  return block;
}

// Unmaps cached blocks, oldest first, until the cache fits its limit. Called with the lock held;
// munmap allocates nothing in this process.
void trim_cache(Pool& p) {
  while (p.stats.cached_bytes > kCacheLimit) {
    Slot* oldest = nullptr;
    for (Slot& s : p.slots)
      if (s.block && !s.live && (!oldest || s.released_at < oldest->released_at)) oldest = &s;
    if (!oldest) return;
    ::munmap(oldest->block, oldest->bytes);
    p.stats.cached_bytes -= oldest->bytes;
    *oldest = Slot{};
  }
}

}  // namespace

void* acquire(size_t bytes) noexcept {
  if (bytes == 0 || bytes > (SIZE_MAX >> 1)) return nullptr;
  const size_t need = round_up(bytes, kHugePage);
  Pool& p = pool();
  {
    // The smallest cached block that fits, if it wastes less than half of itself.
    std::lock_guard lock(p.mutex);
    Slot* best = nullptr;
    for (Slot& s : p.slots)
      if (s.block && !s.live && s.bytes >= need && s.bytes / 2 < need && (!best || s.bytes < best->bytes)) best = &s;
    if (best) {
      best->live = true;
      p.stats.cached_bytes -= best->bytes;
      p.stats.live_bytes += best->bytes;
      ++p.stats.reused;
      return best->block;
    }
  }
  void* block = map_aligned(need);
  if (!block) return nullptr;
  std::lock_guard lock(p.mutex);
  for (Slot& s : p.slots)
    if (!s.block) {
      s = Slot{block, need, true, 0};
      p.stats.live_bytes += need;
      ++p.stats.mapped;
      return block;
    }
  ::munmap(block, need);  // the table is full: the ordinary allocator serves this request
  return nullptr;
}

bool release(void* block) noexcept {
  if (!block || reinterpret_cast<uintptr_t>(block) % kHugePage != 0) return false;
  Pool& p = pool();
  std::lock_guard lock(p.mutex);
  for (Slot& s : p.slots)
    if (s.block == block) {
      if (!s.live) return true;  // a second release of the same block: nothing to do
      s.live = false;
      s.released_at = ++p.clock;
      p.stats.live_bytes -= s.bytes;
      p.stats.cached_bytes += s.bytes;
      trim_cache(p);
      return true;
    }
  return false;
}

Stats stats() noexcept {
  Pool& p = pool();
  std::lock_guard lock(p.mutex);
  return p.stats;
}

}  // namespace moepack::huge_blocks
