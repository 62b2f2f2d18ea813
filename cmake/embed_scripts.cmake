# Generates mm_scripts.hpp/.cpp from lua/*.lua: every script is compiled into
# the binary with lua/lib/common.lua and lua/lib/rules.lua prepended. Run with
#   cmake -DLUA_DIR=... -DOUT_DIR=... -P embed_scripts.cmake
file(GLOB scripts RELATIVE "${LUA_DIR}" "${LUA_DIR}/*.lua")
list(SORT scripts)
file(READ "${LUA_DIR}/lib/common.lua" common)
file(READ "${LUA_DIR}/lib/rules.lua" rules)
string(APPEND common "\n${rules}")
set(enum_items "")
set(sources "")
foreach(s IN LISTS scripts)
  string(REGEX REPLACE "\\.lua$" "" name "${s}")
  file(READ "${LUA_DIR}/${s}" body)
  string(APPEND enum_items "  ${name},\n")
  string(APPEND sources "  {\"${name}\", R\"mmlua(${common}\n${body})mmlua\"},\n")
endforeach()
list(LENGTH scripts count)
set(hpp "// Generated from lua/ by cmake/embed_scripts.cmake. Do not edit.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mm {

/// The scripts in lua/, one per queue operation.
enum class script_id : uint8_t {
${enum_items}};

constexpr size_t script_count = ${count};

struct script_source {
  const char* name;
  const char* text; ///< lua/lib/common.lua and rules.lua, then the script
};

/// Indexed by `static_cast<size_t>(script_id)`.
extern const script_source script_sources[script_count];

} // namespace mm
")
set(cpp "// Generated from lua/ by cmake/embed_scripts.cmake. Do not edit.
#include \"mm_scripts.hpp\"

namespace mm {

const script_source script_sources[script_count] = {
${sources}};

} // namespace mm
")
include("${CMAKE_CURRENT_LIST_DIR}/write_if_changed.cmake")
write_if_changed("${OUT_DIR}/mm_scripts.hpp" "${hpp}")
write_if_changed("${OUT_DIR}/mm_scripts.cpp" "${cpp}")
