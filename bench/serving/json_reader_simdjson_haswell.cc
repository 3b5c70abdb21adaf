// simdjson On-Demand candidates built for haswell (see json_reader_simdjson.inc; the flags are set
// in bench/CMakeLists.txt).
#define LOCKSTEP_SJ_NS sj_haswell
#define LOCKSTEP_SJ_MAKE MakeSimdjsonHaswell
#define LOCKSTEP_SJ_IMPL SimdjsonHaswellImpl
#include "bench/serving/json_reader_simdjson.inc"
