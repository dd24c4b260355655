# ctest tool_cases_replay: `xattn bench --cases` on a committed cases file (CPU, the
# three algorithms, few repetitions), then test_cases_file checks results.json
# against the file; and a broken copy of the file must exit 2 naming its line.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
execute_process(
  COMMAND ${XATTN_BIN} bench --cases ${CASES} --backend cpu --algo naive,flash,splitkv
          --min-reps 1 --max-reps 3 --cell-budget 0.05 --no-progress --out ${WORK}/replay
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "xattn bench --cases exited ${rc}")
endif()
if(NOT out MATCHES "model +[^\n]*attention calls per forward")
  message(FATAL_ERROR "no model totals after the table")
endif()
execute_process(COMMAND ${CHECK_BIN} check ${WORK}/replay/results.json ${CASES}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the replay's results do not match the cases file")
endif()

# Two replays side by side (here the same one twice: no real difference), case by case.
execute_process(COMMAND ${XATTN_BIN} compare ${WORK}/replay/results.json ${WORK}/replay/results.json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(err MATCHES "jansson")
  message("compare is not available in this build (no jansson): not checked")
elseif(NOT rc EQUAL 0 OR NOT out MATCHES "B2 H9/3 Sq1 Sk17 D64 f32")
  message(FATAL_ERROR "compare of two replays: exit ${rc}\n${out}${err}")
endif()

# A cases file with a typo in a member's name: exit 2, the line and the member named.
file(READ ${CASES} text)
string(REPLACE "\"head_dim_v\"" "\"head_dimv\"" bad "${text}")
file(WRITE ${WORK}/bad.json "${bad}")
execute_process(COMMAND ${XATTN_BIN} bench --cases ${WORK}/bad.json --backend cpu --no-progress
                        --out ${WORK}/bad
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err MATCHES "bad.json: line [0-9]+: cases\\[0\\]: unknown member \"head_dimv\"")
  message(FATAL_ERROR "a bad cases file: exit ${rc}, stderr '${err}' (expected 2 and the line)")
endif()
# --cases with case flags is a usage error too.
execute_process(COMMAND ${XATTN_BIN} bench --cases ${CASES} --sq 128 --out ${WORK}/bad
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err MATCHES "--cases FILE brings its own cases")
  message(FATAL_ERROR "--cases with --sq: exit ${rc}, stderr '${err}'")
endif()
message("tool_cases_replay: 1 passed, 0 failed")
