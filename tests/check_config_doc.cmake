# Fails when docs/config.md differs from what `roformer config defaults --markdown` prints.
# Regenerate with: ./build/roformer config defaults --markdown > docs/config.md
execute_process(COMMAND ${ROFORMER_BIN} config defaults --markdown
  OUTPUT_VARIABLE generated RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "roformer config defaults --markdown failed (${rc})")
endif()
file(READ ${DOC} committed)
if(NOT generated STREQUAL committed)
  message(FATAL_ERROR "docs/config.md is stale.\n---> HINT: regenerate it with "
    "`./build/roformer config defaults --markdown > docs/config.md` and commit it.")
endif()
