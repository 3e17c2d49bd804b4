#include "common/stage_key_hash.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace ios {
namespace {

uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Eight bytes at a time, little-endian, each mixed in with a full
// avalanche: byte order and length both change the result. A key's two
// hashes are two independent chains of multiplies computed in one pass, and
// HashStageKeyPair runs two keys' four chains side by side: a search hashes
// every candidate stage's ~1 KB key, and one chain alone leaves the
// multiplier idle while it waits for the previous word's result.
uint64_t LoadLittleEndian(const char* bytes, size_t count) {
  uint64_t word = 0;
  for (size_t b = count; b > 0; --b) word = (word << 8) | static_cast<unsigned char>(bytes[b - 1]);
  return word;
}

uint64_t Word(std::string_view text, size_t at) {
  if constexpr (std::endian::native == std::endian::little) {
    uint64_t word;
    std::memcpy(&word, text.data() + at, 8);
    return word;
  } else {
    return LoadLittleEndian(text.data() + at, 8);
  }
}

// The two chains of one key (seeds: the file format's).
struct KeyChains {
  explicit KeyChains(size_t size)
      : id(Mix(0x1d5c9a3e7b21f403ULL ^ size)), check(Mix(0x6a09e667f3bcc908ULL ^ size)) {}

  void Add(uint64_t word) {
    id = Mix(id ^ word) + 0x9e3779b97f4a7c15ULL;
    check = Mix(check ^ word) + 0x9e3779b97f4a7c15ULL;
  }

  // `text` from byte `at` on is the tail (fewer than 8 bytes).
  StageKeyHash Finish(std::string_view text, size_t at) const {
    const uint64_t tail =
        LoadLittleEndian(text.data() + at, text.size() - at) ^ 0xff51afd7ed558ccdULL;
    return {static_cast<int64_t>(Mix(id ^ tail) >> 1), static_cast<int64_t>(Mix(check ^ tail))};
  }

  uint64_t id, check;
};

}  // namespace

StageKeyHash HashStageKey(std::string_view key) {
  KeyChains chains(key.size());
  size_t at = 0;
  for (; at + 8 <= key.size(); at += 8) chains.Add(Word(key, at));
  return chains.Finish(key, at);
}

void HashStageKeyPair(std::string_view a, std::string_view b, StageKeyHash& hash_a,
                      StageKeyHash& hash_b) {
  KeyChains x(a.size()), y(b.size());
  const size_t both = std::min(a.size(), b.size()) / 8 * 8;  // whole words of both
  size_t at_a = 0;
  for (; at_a < both; at_a += 8) {
    x.Add(Word(a, at_a));
    y.Add(Word(b, at_a));
  }
  size_t at_b = at_a;
  for (; at_a + 8 <= a.size(); at_a += 8) x.Add(Word(a, at_a));
  for (; at_b + 8 <= b.size(); at_b += 8) y.Add(Word(b, at_b));
  hash_a = x.Finish(a, at_a);
  hash_b = y.Finish(b, at_b);
}

}  // namespace ios
