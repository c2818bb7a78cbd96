// The executable's global operator new and delete: requests of huge_blocks::kThreshold bytes or
// more (the per-expert read, load and slab buffers of convert and verify) are served by
// lib/core/huge_blocks (transparent huge pages, reused after release); smaller ones by malloc,
// as the default operators would. lib/core/huge_blocks.h says why.
//
// Only the plain forms are replaced: libstdc++'s array and nothrow forms call these, and its
// sized deletes call the unsized one. The aligned (std::align_val_t) forms are left as they are,
// a matched pair of their own. Sanitizer builds keep the runtime's operators, which track every
// allocation.
#include <cstdlib>
#include <new>

#include "lib/core/huge_blocks.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MOEPACK_KEEP_DEFAULT_NEW 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define MOEPACK_KEEP_DEFAULT_NEW 1
#endif
#endif

#ifndef MOEPACK_KEEP_DEFAULT_NEW

namespace {

void* allocate(std::size_t bytes) noexcept {
  if (bytes >= moepack::huge_blocks::kThreshold)
    if (void* block = moepack::huge_blocks::acquire(bytes)) return block;
  return std::malloc(bytes == 0 ? 1 : bytes);
}

}  // namespace

void* operator new(std::size_t bytes) {
  for (;;) {
    if (void* p = allocate(bytes)) return p;
    std::new_handler handler = std::get_new_handler();
    if (!handler) throw std::bad_alloc();
    handler();
  }
}

void* operator new[](std::size_t bytes) { return ::operator new(bytes); }

void operator delete(void* p) noexcept {
  if (!moepack::huge_blocks::release(p)) std::free(p);
}

void operator delete[](void* p) noexcept { ::operator delete(p); }
void operator delete(void* p, std::size_t) noexcept { ::operator delete(p); }
void operator delete[](void* p, std::size_t) noexcept { ::operator delete(p); }

#endif
