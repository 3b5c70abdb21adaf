// CRC-32C (Castagnoli), the checksum of TensorFlow's file formats: TFRecord framing (datasets,
// TensorBoard event files) and checkpoint tables. Masked form as TensorFlow stores it, so that
// the CRC of data that itself contains CRCs stays well distributed.
#pragma once

#include <cstdint>
#include <string_view>

namespace lockstep {

// The CRC of `data`, continuing from `crc` (the CRC of what came before; 0 to start).
uint32_t Crc32c(std::string_view data, uint32_t crc = 0);

inline uint32_t MaskCrc32c(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}
inline uint32_t UnmaskCrc32c(uint32_t masked) {
  const uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

}  // namespace lockstep
