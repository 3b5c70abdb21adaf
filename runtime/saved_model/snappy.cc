// Google's own Snappy (Debian's libsnappy-dev) does the decompressing; this file keeps the
// checks the fuzzers proved before it is given anything: the stated length against the limit,
// before any allocation, and the whole buffer's validity, before any write.
#include "runtime/saved_model/snappy.h"

#include <snappy.h>

namespace lockstep {

StatusOr<std::string> SnappyUncompress(std::string_view in, size_t max_size) {
  size_t length = 0;
  if (!snappy::GetUncompressedLength(in.data(), in.size(), &length)) {
    return InvalidArgument("snappy: bad length header");
  }
  if (length > max_size) {
    return InvalidArgument("snappy: uncompressed length " + std::to_string(length) + " exceeds the limit of " +
                           std::to_string(max_size));
  }
  if (!snappy::IsValidCompressedBuffer(in.data(), in.size())) {
    return InvalidArgument("snappy: malformed compressed block");
  }
  std::string out(length, '\0');
  if (!snappy::RawUncompress(in.data(), in.size(), out.data())) {
    return InvalidArgument("snappy: malformed compressed block");
  }
  return out;
}

}  // namespace lockstep
