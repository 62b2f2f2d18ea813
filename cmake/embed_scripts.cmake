# Generates mm_scripts.hpp/.cpp from lua/*.lua: every script is compiled into
# the binary with lua/lib/common.lua prepended. Run with
#   cmake -DLUA_DIR=... -DOUT_DIR=... -P embed_scripts.cmake
file(GLOB scripts RELATIVE "${LUA_DIR}" "${LUA_DIR}/*.lua")
list(SORT scripts)
file(READ "${LUA_DIR}/lib/common.lua" common)
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
  const char* text; ///< lua/lib/common.lua followed by the script
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
# Only touch the outputs when they change, so edits elsewhere rebuild nothing.
foreach(pair "hpp;${hpp}" "cpp;${cpp}")
  list(GET pair 0 ext)
  string(LENGTH "${ext};" skip)
  string(SUBSTRING "${pair}" ${skip} -1 text)
  set(out "${OUT_DIR}/mm_scripts.${ext}")
  set(old "")
  if(EXISTS "${out}")
    file(READ "${out}" old)
  endif()
  if(NOT old STREQUAL text)
    file(WRITE "${out}" "${text}")
  endif()
endforeach()
