// Snappy decompression, for the blocks of checkpoint index tables (TensorFlow writes them
// Snappy-compressed when that saves space), by Google's own library (libsnappy-dev).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "runtime/status.h"

namespace lockstep {

// Decompresses `compressed`, which must decode to at most `max_size` bytes. Every length and
// offset is checked against the buffers: malformed input is InvalidArgument, never a read or
// write out of bounds.
StatusOr<std::string> SnappyUncompress(std::string_view compressed, size_t max_size);

}  // namespace lockstep
