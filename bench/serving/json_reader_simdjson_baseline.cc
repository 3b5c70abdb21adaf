// simdjson On-Demand candidates built for baseline (see json_reader_simdjson.inc; the flags are set
// in bench/CMakeLists.txt).
#define LOCKSTEP_SJ_NS sj_baseline
#define LOCKSTEP_SJ_MAKE MakeSimdjsonBaseline
#define LOCKSTEP_SJ_IMPL SimdjsonBaselineImpl
#include "bench/serving/json_reader_simdjson.inc"
