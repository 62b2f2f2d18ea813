#pragma once

// What the heap holds, from whichever allocator the process runs on:
// jemalloc when matchd is linked with it (MM_JEMALLOC, docs/matchd.md) or
// it is preloaded, else glibc malloc (no CAF).

#include <cstddef>

namespace mm {

struct heap_figures {
  size_t in_use = 0; ///< bytes allocated and not freed
  size_t free = 0;   ///< bytes the allocator keeps beyond them
};

/// "jemalloc" or "glibc": the allocator serving malloc in this process.
const char* heap_allocator();

/// The heap now. jemalloc: `stats.allocated` and `stats.resident` minus it
/// (dirty pages, fragmentation and metadata, all resident); glibc:
/// mallinfo2 (in use incl. mmapped chunks; free inside the arenas,
/// resident or not). Thread-safe.
heap_figures heap_now();

/// Hands free heap memory back to the system: jemalloc purges the unused
/// dirty pages of every arena, glibc runs malloc_trim(0). Thread-safe.
void heap_release();

} // namespace mm
