#include "onnx/onnx_external.h"

#include <charconv>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>

#include "common/error.h"
#include "common/printable.h"

namespace ios::onnx_import::detail {
namespace {

//! The non-negative integer `text` of external_data field `key`.
uint64_t Count(const std::string& text, const std::string& key, const std::string& where) {
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || stop != end) {
    throw Error(where + ": external data " + key + " " + Quoted(text) +
                " is not a non-negative integer");
  }
  return value;
}

}  // namespace

const MappedInputFile& ExternalData::File(const std::string& location, const std::string& where) {
  namespace fs = std::filesystem;
  if (!dir_) {
    throw Error(where +
                ": its values are in an external file, which a model read from memory cannot "
                "have (import the model from its file)");
  }
  const fs::path relative(location);
  bool escapes = location.empty() || relative.is_absolute() || relative.has_root_name();
  for (const fs::path& part : relative) escapes = escapes || part == "..";
  if (escapes) {
    throw Error(where + ": external data location " + Quoted(location) +
                " must be a relative path inside the model's directory");
  }
  auto& file = files_[location];
  if (file == nullptr) {
    const std::string path = (fs::path(*dir_) / relative).string();
    try {
      file = std::make_unique<MappedInputFile>(path, "external data",
                                               std::numeric_limits<std::uintmax_t>::max());
    } catch (const Error& e) {
      throw Error(where + ": its external data: " + e.what());
    }
  }
  return *file;
}

std::string_view ExternalData::Bytes(const ::onnx::TensorProto& tensor, const std::string& where) {
  std::optional<std::string> location;
  uint64_t offset = 0;
  std::optional<uint64_t> length;
  for (const ::onnx::StringStringEntryProto& entry : tensor.external_data()) {
    if (entry.key() == "location") location = entry.value();
    if (entry.key() == "offset") offset = Count(entry.value(), "offset", where);
    if (entry.key() == "length") length = Count(entry.value(), "length", where);
  }
  if (!location) throw Error(where + ": external data without a location");
  const std::string_view bytes = File(*location, where).bytes();
  const uint64_t size = bytes.size();
  if (offset > size || (length && *length > size - offset)) {
    throw Error(where + ": external data at offset " + std::to_string(offset) +
                (length ? ", length " + std::to_string(*length) : std::string()) +
                " reaches past " + Quoted(*location) + "'s " + std::to_string(size) + " bytes");
  }
  return bytes.substr(offset, length.value_or(size - offset));
}

void ExternalData::TakeInitializers(::onnx::ModelProto& model, const std::string& source,
                                    std::vector<std::optional<std::string_view>>& raw) {
  auto& initializers = *model.mutable_graph()->mutable_initializer();
  for (int i = 0; i < initializers.size(); ++i) {
    ::onnx::TensorProto& t = initializers[i];
    if (t.data_location() != ::onnx::TensorProto_DataLocation_EXTERNAL) continue;
    if (raw.size() < static_cast<size_t>(initializers.size())) raw.resize(initializers.size());
    raw[static_cast<size_t>(i)] = Bytes(t, source + ": initializer " + Quoted(t.name()));
    t.clear_external_data();
    t.clear_data_location();
    t.set_raw_data(std::string(1, '\0'));
  }
}

}  // namespace ios::onnx_import::detail
