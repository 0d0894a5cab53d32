# cmake -DIN=<file> -DOUT=<file.cpp> -DNAME=<function> -DHEADER=<include> -P embed_text.cmake
# Writes a C++ file defining `std::string_view rlx::NAME()` that returns
# IN's bytes (a raw string literal, so the text reads as it is).
file(READ "${IN}" text)
string(FIND "${text}" ")rlx_embedded\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} holds the raw string's delimiter )rlx_embedded\"")
endif()
file(WRITE "${OUT}.tmp" "// Generated from ${IN} by cmake/embed_text.cmake: edit that file.\n"
  "#include \"${HEADER}\"\n\nnamespace rlx {\n\n"
  "std::string_view ${NAME}() {\n  static constexpr char text[] = R\"rlx_embedded(${text})rlx_embedded\";\n"
  "  return {text, sizeof text - 1};\n}\n\n}  // namespace rlx\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
