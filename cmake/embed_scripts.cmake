# Generates mm_scripts.hpp/.cpp from lua/: ONE Redis function library
# (docs/queue.md "One library"): lua/lib/common.lua, rules.lua,
# claim_fast.lua, groups.lua and proposals.lua, then every lua/*.lua as the
# body of a local function (KEYS, ARGV), each
# registered as mm_<name>_<hash>, where <hash> is the first 12 hex digits of
# the SHA-1 of the library's code. The library is named mm_<hash>: builds
# with different scripts load side by side and never replace each other's.
# Run with
#   cmake -DLUA_DIR=... -DOUT_DIR=... -P embed_scripts.cmake
file(GLOB scripts RELATIVE "${LUA_DIR}" "${LUA_DIR}/*.lua")
list(SORT scripts)
# The shared code first, in this order (later files use earlier ones).
set(code "")
foreach(lib IN ITEMS common rules claim_fast groups proposals)
  file(READ "${LUA_DIR}/lib/${lib}.lua" text)
  string(APPEND code "${text}\n")
endforeach()
set(names "")
foreach(s IN LISTS scripts)
  string(REGEX REPLACE "\\.lua$" "" name "${s}")
  file(READ "${LUA_DIR}/${s}" body)
  string(APPEND code "local function op_${name}(KEYS, ARGV)\n${body}\nend\n")
  list(APPEND names "${name}")
endforeach()
string(SHA1 digest "${code}")
string(SUBSTRING "${digest}" 0 12 hash)
set(library "#!lua name=mm_${hash}\n${code}")
set(enum_items "")
set(sources "")
foreach(name IN LISTS names)
  string(APPEND library
         "redis.register_function('mm_${name}_${hash}', function(keys, args)\n"
         "  bind(keys)\n  return op_${name}(keys, args)\nend)\n")
  string(APPEND enum_items "  ${name},\n")
  string(APPEND sources "  {\"${name}\", \"mm_${name}_${hash}\"},\n")
endforeach()
list(LENGTH scripts count)
set(hpp "// Generated from lua/ by cmake/embed_scripts.cmake. Do not edit.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mm {

/// The operations of lua/, one per file: the functions of the library.
enum class script_id : uint8_t {
${enum_items}};

constexpr size_t script_count = ${count};

struct script_source {
  const char* name;     ///< the file's name without .lua
  const char* function; ///< the library's function: mm_<name>_<hash>
};

/// Indexed by `static_cast<size_t>(script_id)`.
extern const script_source script_sources[script_count];

/// The whole library as FUNCTION LOAD takes it (its first line names it).
extern const char* const script_library;

/// The library's name, mm_<hash>.
extern const char* const script_library_name;

} // namespace mm
")
set(cpp "// Generated from lua/ by cmake/embed_scripts.cmake. Do not edit.
#include \"mm_scripts.hpp\"

namespace mm {

const script_source script_sources[script_count] = {
${sources}};

const char* const script_library = R\"mmlua(${library})mmlua\";

const char* const script_library_name = \"mm_${hash}\";

} // namespace mm
")
include("${CMAKE_CURRENT_LIST_DIR}/write_if_changed.cmake")
write_if_changed("${OUT_DIR}/mm_scripts.hpp" "${hpp}")
write_if_changed("${OUT_DIR}/mm_scripts.cpp" "${cpp}")
