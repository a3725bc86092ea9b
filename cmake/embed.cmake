# Turns a text file into a C function returning it as a string, so the
# default scenario travels inside the binary and tests read the same bytes.
# Usage: cmake -DINPUT=file -DOUTPUT=file.c -DSYMBOL=name -P embed.cmake
file(READ "${INPUT}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "\\\\x\\1" escaped "${hex}")
# Break the literal every 16 bytes (64 characters: every escape is 4) to keep lines short.
string(REGEX REPLACE "(................................................................)" "\\1\"\n  \"" escaped "${escaped}")
file(WRITE "${OUTPUT}.tmp" "/* Generated from ${INPUT} by cmake/embed.cmake. Do not edit. */\nconst char *${SYMBOL}(void);\nconst char *\n${SYMBOL}(void)\n{\n  return \"${escaped}\";\n}\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
