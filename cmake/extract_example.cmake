# Extracts the first ```cpp block of a Markdown page into a source file, so
# that a documented example is compiled and run by the tests as written.
#   cmake -DDOC=page.md -DOUT=file.cpp -P extract_example.cmake
file(READ "${DOC}" text)
string(FIND "${text}" "```cpp\n" begin)
if(begin EQUAL -1)
  message(FATAL_ERROR "no cpp code block in ${DOC}")
endif()
math(EXPR begin "${begin} + 7")
string(SUBSTRING "${text}" ${begin} -1 rest)
string(FIND "${rest}" "\n```" end)
string(SUBSTRING "${rest}" 0 ${end} code)
include("${CMAKE_CURRENT_LIST_DIR}/write_if_changed.cmake")
write_if_changed("${OUT}" "${code}\n")
