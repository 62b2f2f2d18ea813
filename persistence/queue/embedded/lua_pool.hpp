#pragma once

// The allocator of the embedded store's Lua state: per-size free lists for
// the many small objects a script call makes.

#include <cstddef>

namespace mm::embedded {

/// Lua's allocator. A script call creates and drops many small objects
/// (closures, tables, strings: common.lua alone makes dozens per call); they
/// come from per-size free lists here instead of malloc/free. Small blocks
/// are kept for reuse while the state lives. Not thread-safe, like the state.
class lua_pool {
 public:
  lua_pool() = default;
  lua_pool(const lua_pool&) = delete;
  lua_pool& operator=(const lua_pool&) = delete;

  /// Frees every chunk; the Lua state that used the pool must be closed
  /// before.
  ~lua_pool();

  /// A lua_Alloc; `ud` is the pool. As Lua requires: `nsize == 0` frees and
  /// answers null, shrinking never fails, growing answers null when memory
  /// is out (the block stays as it was).
  static void* alloc(void* ud, void* ptr, size_t osize, size_t nsize) noexcept;

 private:
  static constexpr size_t granule = 16; // keeps every block 16-byte aligned
  static constexpr size_t classes = 16;
  static constexpr size_t max_small = granule * classes;
  static constexpr size_t chunk_size = 64 * 1024;

  struct block {
    block* next;
  };

  struct alignas(16) chunk {
    chunk* next;
  };

  /// The free list of a small block of `n` bytes (1..max_small).
  static size_t class_of(size_t n) noexcept {
    return (n + granule - 1) / granule - 1; // n >= 1
  }

  /// A block of `n` (> 0) bytes: from its free list or the current chunk
  /// when small, from malloc when large; null when memory is out.
  void* get(size_t n) noexcept;
  /// Takes back a block that `get(n)` gave.
  void put(void* ptr, size_t n) noexcept;
  /// `alloc` for this pool.
  void* resize(void* ptr, size_t osize, size_t nsize) noexcept;

  block* free_[classes] = {};
  chunk* chunks_ = nullptr;
  char* cur_ = nullptr;
  size_t left_ = 0;
};

} // namespace mm::embedded
