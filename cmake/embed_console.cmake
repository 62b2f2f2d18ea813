# Generates mm_console_assets.hpp/.cpp from the web console's files
# (app/matchd/console/) and the JavaScript client (clients/js/src/index.js, served
# as matchmaker.js): every file is compiled into matchd; nothing reads them
# at run time and nothing is downloaded. Run with
#   cmake -DCONSOLE_DIR=... -DCLIENT_JS=... -DOUT_DIR=... -P embed_console.cmake
cmake_minimum_required(VERSION 3.16)
file(GLOB files RELATIVE "${CONSOLE_DIR}" "${CONSOLE_DIR}/*.html"
     "${CONSOLE_DIR}/*.js" "${CONSOLE_DIR}/*.css")
list(SORT files)
set(entries "")
foreach(f IN LISTS files)
  list(APPEND entries "${f}=${CONSOLE_DIR}/${f}")
endforeach()
list(APPEND entries "matchmaker.js=${CLIENT_JS}")
set(sources "")
set(count 0)
foreach(e IN LISTS entries)
  string(FIND "${e}" "=" eq)
  string(SUBSTRING "${e}" 0 ${eq} name)
  math(EXPR from "${eq} + 1")
  string(SUBSTRING "${e}" ${from} -1 path)
  if(NOT name MATCHES "^[a-z0-9_-]+\\.(html|js|css)$")
    message(FATAL_ERROR "console file '${name}': only [a-z0-9_-].html/js/css")
  endif()
  if(name MATCHES "\\.html$")
    set(type "text/html; charset=utf-8")
  elseif(name MATCHES "\\.js$")
    set(type "text/javascript; charset=utf-8")
  else()
    set(type "text/css; charset=utf-8")
  endif()
  file(READ "${path}" body)
  string(FIND "${body}" ")mmweb\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "console file '${path}' contains the raw string delimiter")
  endif()
  # A raw string literal keeps the bytes; sizeof - 1 is the length.
  string(APPEND sources "  {\"${name}\", \"${type}\", R\"mmweb(${body})mmweb\"},\n")
  math(EXPR count "${count} + 1")
endforeach()
set(hpp "// Generated from app/matchd/console/ and clients/js/src/ by cmake/embed_console.cmake.
// Do not edit.
#pragma once

#include <cstddef>

namespace mm {

struct console_asset {
  const char* name;         ///< file name under /console/
  const char* content_type; ///< for the Content-Type header
  const char* body;         ///< the whole file
};

constexpr size_t console_asset_count = ${count};

/// In name order, matchmaker.js (the JavaScript client) last.
extern const console_asset console_assets[console_asset_count];

} // namespace mm
")
set(cpp "// Generated from app/matchd/console/ and clients/js/src/ by cmake/embed_console.cmake.
// Do not edit.
#include \"mm_console_assets.hpp\"

namespace mm {

const console_asset console_assets[console_asset_count] = {
${sources}};

} // namespace mm
")
include("${CMAKE_CURRENT_LIST_DIR}/write_if_changed.cmake")
write_if_changed("${OUT_DIR}/mm_console_assets.hpp" "${hpp}")
write_if_changed("${OUT_DIR}/mm_console_assets.cpp" "${cpp}")
