# ctest tool_bench_mpi: `xattn bench --mpi`.
# With MPI in the build (MPIEXEC set): under mpiexec -np 2, two tiny CPU cases (Hq 2:
# both strategies run; Hq 3: the all-to-all is refused at that shape), checked on the
# printed per-rank lines and on results.json's fields, results.csv and trace.json
# (counts and bytes, never a time); and a flag --mpi cannot honour exits 2.
# Without MPI (NO_MPI): --mpi is refused with exit 2 and a message.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})

if(NO_MPI)
  execute_process(COMMAND ${XATTN_BIN} bench --mpi --sq 64 --out ${WORK}/out
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${out}${err}")
  if(NOT rc EQUAL 2 OR NOT err MATCHES "--mpi: this xattn was built without MPI")
    message(FATAL_ERROR "bench --mpi without MPI: exit ${rc}, expected 2 and the reason")
  endif()
  if(EXISTS ${WORK}/out)
    message(FATAL_ERROR "bench --mpi without MPI made the output folder")
  endif()
  return()
endif()

execute_process(
  COMMAND ${MPIEXEC} -n 2 ${XATTN_BIN} bench --mpi --mpi-strategy both --backend cpu --sq 64
          --heads 2,3 --head-dim 16 --causal --min-reps 1 --out ${WORK}/out
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mpiexec -n 2 xattn bench --mpi exited ${rc}")
endif()
foreach(re "xattn bench [^\n]* --mpi: 2 ranks, cpu device 0, 1 thread per rank, 2 cases"
           "ring attention: 2 ranks, zigzag layout, causal, B 1, Sq 64, Sk 64, Hq 2"
           "\n   0    0 [^\n]*\n   0    1 [^\n]*\n   0  all [^\n]* total [^\n]*\n   1    0 "
           "\n   1  all [^\n]* total "
           "\njob: [^\n]*slowest rank" "\nbalance: compute per rank"
           "\nall-to-all: 2 ranks" "\nsingle: rank 0 alone" "ring attention: job / single = "
           "cheaper at this shape, measured: "
           "all-to-all: not run at this shape: [^\n]*multiple"
           "\nstaging: host \\(not a CUDA context\\) on every rank\n")
  if(NOT out MATCHES "${re}")
    message(FATAL_ERROR "bench --mpi's output lacks /${re}/")
  endif()
endforeach()

file(READ ${WORK}/out/results.json js)
macro(expect_json want)
  string(JSON got ERROR_VARIABLE jerr GET "${js}" ${ARGN})
  if(jerr OR NOT "${got}" STREQUAL "${want}")
    message(FATAL_ERROR "results.json: ${ARGN} is '${got}' (${jerr}), expected '${want}'")
  endif()
endmacro()
expect_json("xattn.bench-mpi/1" schema)
expect_json(2 ranks)
expect_json(cpu backend)
expect_json(zigzag layout)
string(JSON ncases LENGTH "${js}" cases)
if(NOT ncases EQUAL 2)
  message(FATAL_ERROR "results.json: ${ncases} cases, expected 2")
endif()
expect_json(ok cases 0 status)
expect_json(2 cases 0 heads)
expect_json(ON cases 0 causal)
expect_json(ring cases 0 strategies 0 strategy)
expect_json(measured cases 0 strategies 0 state)
expect_json(alltoall cases 0 strategies 1 strategy)
expect_json(measured cases 0 strategies 1 state)
expect_json(refused cases 1 strategies 1 state)
# The ring on 2 ranks: 2 steps; each rank sends its K/V block once (32 positions x 2
# heads x (16 + 16) f32 = 8192 bytes, the model's figure); under the causal mask with
# the zigzag layout each step covers 2 x 2 (query segment, key segment) pairs.
foreach(r 0 1)
  expect_json(${r} cases 0 strategies 0 ranks ${r} rank)
  expect_json(2 cases 0 strategies 0 ranks ${r} steps)
  expect_json(8192 cases 0 strategies 0 ranks ${r} sum bytes_sent)
  expect_json(8192 cases 0 strategies 0 ranks ${r} step 0 bytes_sent)
  expect_json(0 cases 0 strategies 0 ranks ${r} step 1 bytes_sent)
  expect_json(host cases 0 strategies 0 ranks ${r} staging)
  expect_json("not a CUDA context" cases 0 strategies 0 ranks ${r} staging_note)
  string(JSON calls GET "${js}" cases 0 strategies 0 ranks ${r} sum calls)
  string(JSON skipped GET "${js}" cases 0 strategies 0 ranks ${r} sum skipped)
  math(EXPR pairs "${calls} + ${skipped}")
  if(NOT pairs EQUAL 8 OR calls LESS 1)
    message(FATAL_ERROR "rank ${r}: ${calls} calls + ${skipped} skipped, expected 8 pairs")
  endif()
endforeach()
expect_json(8192 cases 0 strategies 0 model_bytes_per_rank)
expect_json(16384 cases 0 strategies 0 bytes_sent)
foreach(key job_ms compute_ms wait_ms single_ms)
  if(key STREQUAL "single_ms")
    string(JSON v GET "${js}" cases 0 ${key})
  else()
    string(JSON v GET "${js}" cases 0 strategies 0 ${key})
  endif()
  if(NOT v MATCHES "^[0-9]")
    message(FATAL_ERROR "results.json: ${key} is '${v}', expected a number >= 0")
  endif()
endforeach()

file(STRINGS ${WORK}/out/results.csv csv)
list(GET csv 0 head)
if(NOT head MATCHES "^case,strategy,rank,step,compute_ms,stage_ms,comm_ms,wait_ms")
  message(FATAL_ERROR "results.csv header: ${head}")
endif()
if(NOT csv MATCHES "causal-br,ring,1,all," OR NOT csv MATCHES "causal-br,alltoall,1,0,")
  message(FATAL_ERROR "results.csv lacks rank 1's rows")
endif()

# trace.json: one process per rank (pid = rank, named "rank N").
file(READ ${WORK}/out/trace.json tr)
string(JSON nev LENGTH "${tr}" traceEvents)
set(named "")
math(EXPR last "${nev} - 1")
foreach(i RANGE ${last})
  string(JSON ph GET "${tr}" traceEvents ${i} ph)
  if(ph STREQUAL "M")
    string(JSON pid GET "${tr}" traceEvents ${i} pid)
    string(JSON name GET "${tr}" traceEvents ${i} args name)
    if(NOT name STREQUAL "rank ${pid}")
      message(FATAL_ERROR "trace.json: process ${pid} named '${name}'")
    endif()
    list(APPEND named ${pid})
  endif()
endforeach()
list(REMOVE_DUPLICATES named)
list(SORT named)
if(NOT named STREQUAL "0;1")
  message(FATAL_ERROR "trace.json: processes '${named}', expected one per rank (0;1)")
endif()

# f16 through --dtype: the ring's K/V block
# is half the f32 one (32 positions x 2 heads x (16 + 16) x 2 bytes = 4096).
execute_process(
  COMMAND ${MPIEXEC} -n 2 ${XATTN_BIN} bench --mpi --backend cpu --sq 64 --heads 2 --head-dim 16
          --causal --dtype f16 --min-reps 1 --out ${WORK}/f16
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0 OR NOT out MATCHES "ring attention: 2 ranks, [^\n]*, Dv 16, f16, cpu")
  message(FATAL_ERROR "bench --mpi --dtype f16: exit ${rc}, or no f16 ring table")
endif()
file(READ ${WORK}/f16/results.json js)
expect_json(ok cases 0 status)
expect_json(f16 cases 0 dtype)
expect_json(f16 cases 0 kv_dtype)
expect_json(4096 cases 0 strategies 0 ranks 0 sum bytes_sent)
expect_json(4096 cases 0 strategies 0 model_bytes_per_rank)

# 8-bit K/V caches: the ring and the all-to-all refuse them with the library's message
# (each rank's random cache sized by xattn_dtype_bytes: q8_0 has no bytes per value, an
# fp8 value one byte), and rank 0 alone still runs the whole problem. With D 16 q8_0 has
# no whole blocks: the single run's refusal says so.
foreach(kd q8_0 fp8e5m2)
  execute_process(
    COMMAND ${MPIEXEC} -n 2 ${XATTN_BIN} bench --mpi --mpi-strategy both --backend cpu --sq 64
            --heads 2 --head-dim 32 --kv-dtype ${kd} --min-reps 1 --out ${WORK}/${kd}
    TIMEOUT 120 RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${out}${err}")
  foreach(s "ring attention" all-to-all)
    if(NOT out MATCHES "${s}: not run at this shape: k.dtype: ${kd} K/V caches are not supported")
      message(FATAL_ERROR "bench --mpi --kv-dtype ${kd}: exit ${rc}, no ${s} refusal")
    endif()
  endforeach()
  if(NOT rc EQUAL 0 OR NOT out MATCHES "\nsingle: rank 0 alone, the whole problem in one call")
    message(FATAL_ERROR "bench --mpi --kv-dtype ${kd}: exit ${rc}, or no single run")
  endif()
  file(READ ${WORK}/${kd}/results.json js)
  expect_json(${kd} cases 0 kv_dtype)
  expect_json(refused cases 0 strategies 0 state)
  expect_json(refused cases 0 strategies 1 state)
endforeach()
execute_process(
  COMMAND ${MPIEXEC} -n 2 ${XATTN_BIN} bench --mpi --backend cpu --sq 64 --heads 2 --head-dim 16
          --kv-dtype q8_0 --min-reps 1 --out ${WORK}/q8d16
  TIMEOUT 120 RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
set(re "single: rank 0 alone could not run [^\n]*head dim 16 is not a multiple of 32")
if(NOT rc EQUAL 0 OR NOT out MATCHES "${re}")
  message(FATAL_ERROR "bench --mpi --kv-dtype q8_0 at D 16: exit ${rc}, or no reason named")
endif()

# XATTN_MPI_STAGING=host forces host staging, and the report says why.
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env XATTN_MPI_STAGING=host ${MPIEXEC} -n 2 ${XATTN_BIN} bench --mpi
          --backend cpu --sq 32 --heads 1 --head-dim 8 --min-reps 1 --out ${WORK}/staging
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0 OR NOT out MATCHES "\nstaging: host \\(XATTN_MPI_STAGING=host\\) on every rank")
  message(FATAL_ERROR "XATTN_MPI_STAGING=host: exit ${rc}, or no such staging line")
endif()

# What --mpi cannot honour is refused on every rank with exit 2.
execute_process(COMMAND ${MPIEXEC} -n 2 ${XATTN_BIN} bench --mpi --threads 1,2 --sq 64
                        --out ${WORK}/refused
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT err MATCHES "--mpi: a list of --threads is not supported with --mpi" OR NOT rc EQUAL 2)
  message(FATAL_ERROR "bench --mpi --threads 1,2: exit ${rc}, expected a refusal")
endif()
