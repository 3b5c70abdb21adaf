// Base64 (RFC 4648, standard alphabet, with padding), as TensorFlow Serving's REST API uses for
// bytes in JSON.
#pragma once

#include <string>
#include <string_view>

#include "runtime/status.h"

namespace lockstep {

std::string Base64Encode(std::string_view bytes);

// Decodes padded or unpadded base64; the URL-safe alphabet ('-', '_') is accepted too, as
// TensorFlow's decoder does. Anything else (whitespace, bad padding, stray characters, a
// length that no encoding produces) is InvalidArgument.
StatusOr<std::string> Base64Decode(std::string_view text);

}  // namespace lockstep
