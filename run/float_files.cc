#include "run/float_files.h"

#include <cstdint>
#include <cstring>

#include "common/error.h"
#include "common/input_file.h"

namespace ios::run {

std::vector<float> ChannelsFirst(const std::vector<float>& nhwc, const Shape& s) {
  std::vector<float> nchw(nhwc.size());
  const size_t plane = static_cast<size_t>(s.h) * s.w, sample = plane * s.c;
  for (size_t n = 0; n * sample < nhwc.size(); ++n) {
    for (size_t p = 0; p < plane; ++p) {
      for (int c = 0; c < s.c; ++c) {
        nchw[n * sample + c * plane + p] = nhwc[n * sample + p * s.c + c];
      }
    }
  }
  return nchw;
}

std::vector<float> ReadFloats(const std::string& path, const std::string& option, size_t count,
                              const std::string& shape) {
  const std::uintmax_t bytes = count * sizeof(float);
  std::uintmax_t size = 0;
  try {
    size = CheckInputFile(path, option, kAnySize);
  } catch (const Error& e) {
    throw Error(option + " " + e.what());
  }
  if (size != bytes) {
    throw Error(option + " " + path + ": " +
                (size % sizeof(float) != 0 ? std::to_string(size) + " bytes, not whole"
                                           : std::to_string(size / sizeof(float))) +
                " float32 values; " + std::to_string(count) + " expected (" + shape +
                ", raw little-endian float32 without a header)");
  }
  const std::string data = ReadInputFile(path, option, bytes);
  if (data.size() != bytes) throw Error(option + " " + path + ": changed while being read");
  std::vector<float> values(count);
  std::memcpy(values.data(), data.data(), data.size());
  return values;
}

}  // namespace ios::run
