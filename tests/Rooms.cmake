# Fails when a file includes a header from a room it may not use (docs/architecture.md, "Rooms and
# libraries"): the engine includes no Qt and nothing from profiles/, launcher/, views/ or app/; the lower
# engine rooms do not include the rooms built on them; views/ outside views/teaching does not include the
# teaching room. Comment lines are skipped. Run as: cmake -DSOURCE_DIR=<repo> -P this-file
#
# Each rule: "<room: path prefix regex>;<forbidden #include regex>" (checked on the text inside the quotes or
# angle brackets of an #include line).
set(rules
  "^engine/;^(profiles|launcher|views|app)/"
  "^engine/;^Q[A-Za-z]*$"
  "^engine/json/;^engine/(trace|plan|profiles|bridges|comm|train|tools)/"
  "^engine/trace/;^engine/(plan|profiles|bridges|comm|train|tools)/"
  "^engine/plan/;^engine/(profiles|bridges|comm|train|tools)/"
  "^engine/profiles/;^engine/(bridges|comm|train|tools)/"
  "^engine/bridges/;^engine/(profiles|comm|train|tools)/"
  "^engine/(comm|train)/;^engine/(profiles|bridges|tools)/"
  "^(profiles|launcher)/;^(views|app)/"
  "^views/[^/]+$;^(views/teaching|app)/"
  "^views/teaching/;^app/")
file(GLOB_RECURSE sources RELATIVE "${SOURCE_DIR}" "${SOURCE_DIR}/engine/*" "${SOURCE_DIR}/profiles/*"
     "${SOURCE_DIR}/launcher/*" "${SOURCE_DIR}/views/*")
list(FILTER sources INCLUDE REGEX "\\.(h|cpp|cu|cuh|in)$")
set(offenders "")
foreach(rel IN LISTS sources)
  file(STRINGS "${SOURCE_DIR}/${rel}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*[<\"]([^>\"]*)[>\"].*$" "\\1" header "${line}")
    set(i 0)
    list(LENGTH rules count)
    while(i LESS count)
      list(GET rules ${i} room)
      math(EXPR j "${i} + 1")
      list(GET rules ${j} forbidden)
      if(rel MATCHES "${room}" AND header MATCHES "${forbidden}")
        string(APPEND offenders "  ${rel}: #include ${header} (files matching ${room} may not include ${forbidden})\n")
      endif()
      math(EXPR i "${i} + 2")
    endwhile()
  endforeach()
endforeach()
if(offenders)
  message(FATAL_ERROR "includes across the rooms' rules:\n${offenders}")
endif()
list(LENGTH sources n)
message(STATUS "${n} files follow the rooms' include rules")
