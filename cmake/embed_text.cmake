# Writes a C++ source that returns a text file's contents as a
# std::string_view, so that files such as the report's .js and .css stay
# real files (editable, lintable) and still ship inside the executable.
#   cmake -DINPUT=file -DOUTPUT=file.cc -DFUNCTION=posenc::report::Name -P embed_text.cmake
# FUNCTION is a qualified name; the generated file defines it. The text is one
# raw string literal, so it must not contain the delimiter below.
set(delim "posenc_embed")
file(READ "${INPUT}" text)
string(FIND "${text}" ")${delim}\"" found)
if(NOT found EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw-string delimiter ')${delim}\"'")
endif()
string(REGEX MATCH "^(.*)::([^:]+)$" _ "${FUNCTION}")
set(ns "${CMAKE_MATCH_1}")
set(name "${CMAKE_MATCH_2}")
file(WRITE "${OUTPUT}.tmp"
  "// Generated from ${INPUT} by cmake/embed_text.cmake; do not edit.\n"
  "#include <string_view>\n\nnamespace ${ns} {\n\n"
  "std::string_view ${name}() {\n  return R\"${delim}(${text})${delim}\";\n}\n\n"
  "}  // namespace ${ns}\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
