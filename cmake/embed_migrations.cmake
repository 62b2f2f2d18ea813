# Generates mm_migrations.hpp/.cpp from persistence/matchdb/migrations/NNNN_name.sql:
# every migration is compiled into the binary; nothing reads SQL files at run
# time. Run with
#   cmake -DMIGRATIONS_DIR=... -DOUT_DIR=... -P embed_migrations.cmake
cmake_minimum_required(VERSION 3.16) # script mode: IN_LIST needs CMP0057
file(GLOB files RELATIVE "${MIGRATIONS_DIR}" "${MIGRATIONS_DIR}/*.sql")
list(SORT files) # zero-padded versions: text order is version order
set(sources "")
set(seen "")
foreach(f IN LISTS files)
  if(NOT f MATCHES "^([0-9][0-9][0-9][0-9])_([a-z0-9_]+)\\.sql$")
    message(FATAL_ERROR "migration '${f}' is not named NNNN_name.sql")
  endif()
  math(EXPR version "${CMAKE_MATCH_1}")
  if(version IN_LIST seen)
    message(FATAL_ERROR "migration version ${version} is used twice")
  endif()
  list(APPEND seen ${version})
  string(REGEX REPLACE "\\.sql$" "" name "${f}")
  file(READ "${MIGRATIONS_DIR}/${f}" body)
  string(FIND "${body}" ")mmsql\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "migration '${f}' contains the raw string delimiter")
  endif()
  string(APPEND sources "  {${version}, \"${name}\", R\"mmsql(${body})mmsql\"},\n")
endforeach()
list(LENGTH files count)
if(count EQUAL 0)
  message(FATAL_ERROR "no migrations in ${MIGRATIONS_DIR}")
endif()
set(hpp "// Generated from persistence/matchdb/migrations/ by cmake/embed_migrations.cmake.
// Do not edit.
#pragma once

#include <cstddef>

namespace mm {

struct migration_source {
  int version;      ///< NNNN of the file name
  const char* name; ///< file name without .sql, e.g. \"0001_init\"
  const char* sql;  ///< the whole file
};

constexpr size_t migration_count = ${count};

/// In version order.
extern const migration_source migration_sources[migration_count];

} // namespace mm
")
set(cpp "// Generated from persistence/matchdb/migrations/ by cmake/embed_migrations.cmake.
// Do not edit.
#include \"mm_migrations.hpp\"

namespace mm {

const migration_source migration_sources[migration_count] = {
${sources}};

} // namespace mm
")
include("${CMAKE_CURRENT_LIST_DIR}/write_if_changed.cmake")
write_if_changed("${OUT_DIR}/mm_migrations.hpp" "${hpp}")
write_if_changed("${OUT_DIR}/mm_migrations.cpp" "${cpp}")
