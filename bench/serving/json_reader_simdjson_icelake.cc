// simdjson On-Demand candidates built for icelake (see json_reader_simdjson.inc; the flags are set
// in bench/CMakeLists.txt).
#define LOCKSTEP_SJ_NS sj_icelake
#define LOCKSTEP_SJ_MAKE MakeSimdjsonIcelake
#define LOCKSTEP_SJ_IMPL SimdjsonIcelakeImpl
#include "bench/serving/json_reader_simdjson.inc"
