# write_if_changed(PATH TEXT): writes only when the content differs, so that
# regenerating an unchanged header rebuilds nothing.
function(write_if_changed path text)
  set(old "")
  if(EXISTS "${path}")
    file(READ "${path}" old)
  endif()
  if(NOT old STREQUAL text)
    file(WRITE "${path}" "${text}")
  endif()
endfunction()
