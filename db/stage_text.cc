#include "db/stage_text.h"

#include <zlib.h>

#include <algorithm>
#include <string>

#include "common/error.h"
#include "common/stage_key.h"

namespace ios::db {
namespace {

// Format byte of a packed text: 1 = raw deflate against kDictionaryV1 of
// key, NUL, description. A new dictionary needs a new format byte; the old
// one stays readable forever.
constexpr unsigned char kFormatV1 = 1;
// Format byte of a packed long text (PackLongText): raw deflate, no
// dictionary. Distinct from kFormatV1, so neither reads as the other.
constexpr unsigned char kFormatLong = 2;

// Fragments that recur in canonical keys and descriptions
// (common/stage_spec_text.cc: StageSpec::Key, Describe; common/stage.cc:
// StageKeyer): the separable-convolution units of
// NASNet- and RandWire-like networks first, then plain convolutions,
// pooling and shapes. Deflate finds matches anywhere in it; those nearest
// the end are the cheapest to refer to, so the commonest come last. Part of
// the file format: never edit, add a new version.
constexpr std::string_view kDictionaryV1 =
    ",d1x1,g1,b1,none);]<X0[0:1232]+X1[0:1232]+|>;g=seq[act(relu);conv(o1232,k3x3,s1x1,p1x1,d"
    "1x1,g1232,b1,none);conv(o1232,k1x1,s1x1,p0x0,d1x1,g1,b1,none);]<L0[0:1232]+|> relu > con"
    "v3x3/1x1 p1x1 g1232 1232 > conv1x1/1x1 p0x0 1232 -> relu > conv3x3/1x1 p1x1 g616 616 > c"
    "onv1x1/1x1 p0x0 616 || 1232x7x7, 616x14x14, 308x28x28, 154x56x56,;g=seq[act(relu);conv(o"
    "616,k3x3,s1x1,p1x1,d1x1,g616,b1,none);conv(o616,k1x1,s1x1,p0x0,d1x1,g1,b1,none);]<X2[0:6"
    "16]+X3[0:616]+L1[0:616]+|>seq[act(relu);conv(o168,k5x5,s1x1,p2x2,d1x1,g168,b1,none);conv"
    "(o168,k1x1,s1x1,p0x0,d1x1,g1,b1,none);]<X3[0:168]+|> relu > conv5x5/1x1 p2x2 g168 168 > "
    "conv1x1/1x1 p0x0 168 || relu > conv3x3/1x1 p1x1 g168 168 > conv1x1/1x1 p0x0 168 on 1008x"
    "42x42, 168x42x42, 336x21x21, 672x11x11,;g=seq[act(relu);conv(o168,k3x3,s1x1,p1x1,d1x1,g1"
    "68,b1,none);conv(o168,k1x1,s1x1,p0x0,d1x1,g1,b1,none);]<X1[0:168]+|>;g=seq[act(relu);con"
    "v(o168,k1x1,s1x1,p0x0,d1x1,g1,b1,none);]<X0[0:1008]+|>"
    "seq[act(sigmoid);act(tanh);act(none);]pool(global_max,k1x1,s1x1,p0x0)"
    "pool(global_avg,k1x1,s1x1,p0x0)global_avgpool global_maxpool sigmoid tanh "
    "mul<X0[0:32]+|X1[0:32]+|>add<L0[0:64]+|X1[0:64]+|>id<X0[0:128]+X1[0:128]+|>"
    "identity eltwise add sequential conv7x7/2x2 p3x3 conv1x7/1x1 p0x3 conv7x1/1x1 p3x0 "
    ",k7x7,s2x2,p3x3,d1x1,g1,b1,relu),k1x7,s1x1,p0x3,d1x1,g1,b1,relu)"
    ",k7x1,s1x1,p3x0,d1x1,g1,b1,relu),k5x5,s1x1,p2x2,d1x1,g1,b1,relu)"
    ",k3x3,s2x2,p0x0,d1x1,g1,b1,relu),k3x3,s2x2,p1x1,d1x1,g1,b1,relu)"
    ",k3x3,s1x1,p1x1,d1x1,g32,b0,none),k5x5,s1x1,p2x2,d1x1,g32,b0,none)"
    ",k1x1,s1x1,p0x0,d1x1,g1,b0,none)pool(max,k3x3,s2x2,p0x0)pool(max,k3x3,s2x2,p1x1)"
    "pool(max,k3x3,s1x1,p1x1)pool(avg,k3x3,s2x2,p1x1)pool(avg,k3x3,s1x1,p1x1)"
    "maxpool3x3/2x2 p0x0 maxpool3x3/1x1 p1x1 avgpool3x3/1x1 p1x1 conv5x5/1x1 p2x2 "
    "conv3x3/2x2 p0x0 relu -> act(relu)<X0[0:256]+|>v1;merge;in=768x17x17,2048x8x8,"
    "1280x8x8,288x35x35,192x35x35,256x35x35,512x14x14,96x55x55,128x55x55,64x55x55,"
    " on 64x56x56, 32x32x32, 16x16x16, 8x16x16 merge conv1x1/1x1 p0x0 64 relu || "
    "conv3x3/1x1 p1x1 96 relu || conv1x1/1x1 p0x0 192 relu -> conv3x3/1x1 p1x1 128 relu"
    " parallel conv1x1/1x1 p0x0 48 relu || <X0[0:192]+|>conv(o192,k1x1,s1x1,p0x0,d1x1,g1,b1,"
    "relu)<L0[0:64]+|>conv(o96,k3x3,s1x1,p1x1,d1x1,g1,b1,relu)<L1[0:96]+|>;g=conv(o64,"
    "k1x1,s1x1,p0x0,d1x1,g1,b1,relu)<X0[0:256]+|>;g=conv(o128,k1x1,s1x1,p0x0,d1x1,g1,b1,"
    "relu)<X1[0:128]+|>v1;parallel;in=";

void Check(int status, const char* what) {
  if (status != Z_OK) throw Error(std::string("stage text: zlib ") + what + " failed");
}

// One deflate stream per thread, reset for each text: setting one up
// allocates and clears some 400 KB (level 9, memLevel 9), several times
// what packing a key of a few hundred bytes costs, and a search packs a key
// per stage it measures.
class Deflater {
 public:
  static Deflater& OfThisThread() {
    thread_local Deflater deflater;
    return deflater;
  }
  Deflater(const Deflater&) = delete;
  Deflater& operator=(const Deflater&) = delete;
  ~Deflater() { deflateEnd(&stream_); }

  z_stream& Reset() {
    Check(deflateReset(&stream_), "deflateReset");
    return stream_;
  }

 private:
  Deflater() {
    Check(deflateInit2(&stream_, Z_BEST_COMPRESSION, Z_DEFLATED, -15, 9, Z_DEFAULT_STRATEGY),
          "deflateInit2");
  }
  z_stream stream_{};
};

// `format` byte, then raw deflate of `raw` against `dictionary` (none when
// empty).
std::string Pack(unsigned char format, std::string_view dictionary, std::string_view raw) {
  z_stream& stream = Deflater::OfThisThread().Reset();
  std::string packed(1 + deflateBound(&stream, raw.size()), '\0');
  packed[0] = static_cast<char>(format);
  int status = dictionary.empty() ? Z_OK
                                  : deflateSetDictionary(
                                        &stream, reinterpret_cast<const Bytef*>(dictionary.data()),
                                        static_cast<uInt>(dictionary.size()));
  if (status == Z_OK) {
    stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
    stream.avail_in = static_cast<uInt>(raw.size());
    stream.next_out = reinterpret_cast<Bytef*>(packed.data() + 1);
    stream.avail_out = static_cast<uInt>(packed.size() - 1);
    status = deflate(&stream, Z_FINISH) == Z_STREAM_END ? Z_OK : Z_BUF_ERROR;
  }
  packed.resize(1 + stream.total_out);
  Check(status, "deflate");
  return packed;
}

// Pack's inverse; `what` names the text in errors.
std::string Unpack(unsigned char format, std::string_view dictionary, std::string_view packed,
                   const std::string& what) {
  if (packed.empty() || static_cast<unsigned char>(packed[0]) != format) {
    throw Error(what + ": not a packed " + what + " (unknown format byte)");
  }
  z_stream stream{};
  Check(inflateInit2(&stream, -15), "inflateInit2");
  const bool dictionary_ok =
      dictionary.empty() ||
      inflateSetDictionary(&stream, reinterpret_cast<const Bytef*>(dictionary.data()),
                           static_cast<uInt>(dictionary.size())) == Z_OK;
  std::string raw;
  int status = dictionary_ok ? Z_OK : Z_DATA_ERROR;
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(packed.data() + 1));
  stream.avail_in = static_cast<uInt>(packed.size() - 1);
  char buffer[4096];
  while (status == Z_OK) {
    stream.next_out = reinterpret_cast<Bytef*>(buffer);
    stream.avail_out = sizeof buffer;
    status = inflate(&stream, Z_NO_FLUSH);
    raw.append(buffer, sizeof buffer - stream.avail_out);
    if (status == Z_OK && stream.avail_in == 0 && stream.avail_out != 0) status = Z_DATA_ERROR;
  }
  inflateEnd(&stream);
  if (status != Z_STREAM_END) throw Error(what + ": a packed " + what + " is damaged");
  return raw;
}

}  // namespace

std::string PackStageText(const StageText& text) {
  std::string raw = text.key;
  raw += '\0';
  raw += text.description;
  return Pack(kFormatV1, kDictionaryV1, raw);
}

StageText UnpackStageText(std::string_view packed) {
  const std::string raw = Unpack(kFormatV1, kDictionaryV1, packed, "stage text");
  const size_t nul = raw.find('\0');
  if (nul == std::string::npos) throw Error("stage text: a packed stage text is damaged");
  StageText text{raw.substr(0, nul), raw.substr(nul + 1)};
  if (text.description.empty()) text.description = DescribeStageKey(text.key);
  return text;
}

std::string PackLongText(std::string_view text) { return Pack(kFormatLong, {}, text); }

std::string UnpackLongText(std::string_view packed) {
  return Unpack(kFormatLong, {}, packed, "long text");
}

std::string DescribeStageKey(std::string_view key) {
  try {
    return ParseStageKey(key).Describe();
  } catch (const Error&) {
    return "";  // not a canonical key (tests store made-up ones)
  }
}

}  // namespace ios::db
