// Random and mutated frames: Decode never crashes, and what it accepts is usable.
#include "tests/schema/protocol_testing.h"

namespace ios::schema {
namespace {

using namespace protocol_testing;

// -------------------------------------------------------------------- fuzz

// Whatever Decode accepts must be usable as is: a stage keys, describes and
// survives another round trip unchanged.
void ExpectUsable(const Message& message) {
  if (const auto* query = std::get_if<StageQuery>(&message)) {
    const std::string key = query->stage.Key();
    EXPECT_FALSE(query->stage.Describe().empty());
    EXPECT_GT(query->stage.OperatorCount(), 0);
    const Message again = Decoded(Encode(*query));
    ASSERT_TRUE(std::holds_alternative<StageQuery>(again));
    EXPECT_EQ(std::get<StageQuery>(again).stage.Key(), key);
  } else {
    EXPECT_TRUE(std::holds_alternative<Message>(Decode(Encode(message))));
  }
}

struct FuzzTally {
  int decoded = 0, invalid = 0, malformed = 0, other = 0;
  void Count(const std::variant<Message, DecodeError>& outcome) {
    if (const auto* message = std::get_if<Message>(&outcome)) {
      ++decoded;
      ExpectUsable(*message);
      return;
    }
    const DecodeError& error = std::get<DecodeError>(outcome);
    EXPECT_FALSE(error.message.empty()) << ToString(error.kind);
    (error.kind == Kind::kInvalid ? invalid : error.kind == Kind::kMalformed ? malformed : other)++;
  }
};

TEST(ProtocolFuzzTest, RandomBytesNeverCrash) {
  std::mt19937_64 rng(20240611);
  FuzzTally tally;
  std::string bytes;
  for (int i = 0; i < 6000; ++i) {
    const size_t words = rng() % 64;
    bytes.resize(words * 8 + (i % 10 == 0 ? rng() % 8 : 0));
    for (char& c : bytes) c = static_cast<char>(rng());
    // Two thirds of the time a plausible segment table, and half of those
    // also a root Envelope of our version with a random body: random bytes
    // then reach the body's pointers and checks, not just the header.
    if (i % 3 != 0 && words > 4) {
      const uint32_t table[2] = {0, static_cast<uint32_t>(words - 1)};
      std::memcpy(bytes.data(), table, sizeof table);
      if (i % 3 == 1) {
        const uint64_t root = uint64_t{1} << 32 | uint64_t{1} << 48;  // struct: 1 data, 1 pointer
        const uint64_t data = kProtocolVersion | (rng() % 6) << 32;   // version, which()
        // The body: a struct right after the pointer, of random small size.
        const uint64_t body = (rng() % 3) << 32 | (rng() % 4) << 48;
        std::memcpy(bytes.data() + 8, &root, 8);
        std::memcpy(bytes.data() + 16, &data, 8);
        std::memcpy(bytes.data() + 24, &body, 8);
      }
    }
    tally.Count(Decode(bytes));
  }
  EXPECT_GT(tally.decoded, 50);
  EXPECT_GT(tally.invalid, 100);
  EXPECT_GT(tally.malformed, 1000);
  EXPECT_EQ(tally.decoded + tally.invalid + tally.malformed + tally.other, 6000);
}

// Mutations that target capnp's encoding: bytes, whole words, and pointers
// with wild offsets or element counts.
std::string Mutate(std::string bytes, std::mt19937_64& rng) {
  const size_t words = bytes.size() / 8;
  const auto word_at = [&](size_t w) { return bytes.data() + 8 * w; };
  const auto set_word = [&](size_t w, uint64_t value) { std::memcpy(word_at(w), &value, 8); };
  const size_t w = 1 + rng() % (words - 1);  // never the segment table, usually
  switch (rng() % 8) {
    case 0:  // a few random bytes
      for (int k = 1 + static_cast<int>(rng() % 4); k > 0; --k) {
        bytes[rng() % bytes.size()] = static_cast<char>(rng());
      }
      break;
    case 1:  // one bit
      bytes[rng() % bytes.size()] ^= static_cast<char>(1 << (rng() % 8));
      break;
    case 2:  // insert a word
      bytes.insert(8 * w, std::string(8, static_cast<char>(rng())));
      break;
    case 3:  // delete a word
      bytes.erase(8 * w, 8);
      break;
    case 4: {  // struct pointer with a huge (or negative) offset
      const int32_t offset = static_cast<int32_t>(rng() % 2 ? (1 << 29) - 1 : -(1 << 29));
      set_word(w, (static_cast<uint64_t>(static_cast<uint32_t>(offset) << 2)) |
                      (static_cast<uint64_t>(rng() & 0xffffffff) << 32));
      break;
    }
    case 5: {  // list pointer, offset 0, huge element count, random element size
      const uint64_t count = (1u << 29) - 1 - (rng() % 16);
      set_word(w, 1 | (static_cast<uint64_t>(rng() % 8) << 32) | (count << 35));
      break;
    }
    case 6: {  // list of zero-sized elements: cheap on the wire, costly to walk
      set_word(w, 1 | (uint64_t{0} << 32) | (uint64_t{(1u << 29) - 1} << 35));
      break;
    }
    case 7: {  // far pointer to a segment that does not exist, or the segment table
      if (rng() % 2) {
        set_word(w, 2 | (static_cast<uint64_t>(rng() % 1000) << 3) | (rng() << 32));
      } else {
        const uint32_t table[2] = {static_cast<uint32_t>(rng() % 4),
                                   static_cast<uint32_t>(rng() % (2 * words))};
        std::memcpy(bytes.data(), table, sizeof table);
      }
      break;
    }
  }
  return bytes;
}

TEST(ProtocolFuzzTest, MutatedMessagesDecodeOrFailWithoutCrashing) {
  std::mt19937_64 rng(7);
  StageQuery small;
  small.stage.externals = {{8, 4, 4}};
  small.stage.groups = {{{ConvOp(8, 3, 1, 1), {{External(0, 0, 8)}}, {8, 4, 4}}}};
  const std::vector<std::string> seeds = {Encode(SampleQuery()), Encode(small),
                                          Encode(SampleHello()), Encode(SampleResult()),
                                          Encode(Reject{RejectReason::kMalformed, "no"})};
  FuzzTally tally;
  const int kCases = 8000;
  for (int i = 0; i < kCases; ++i) {
    std::string bytes = seeds[static_cast<size_t>(i) % seeds.size()];
    for (int rounds = 1 + static_cast<int>(rng() % 3); rounds > 0 && bytes.size() > 16; --rounds) {
      bytes = Mutate(std::move(bytes), rng);
    }
    tally.Count(Decode(bytes));
    if (::testing::Test::HasFatalFailure()) return;
  }
  // Every outcome occurs, so the mutations reach the reader and the checks.
  EXPECT_GT(tally.decoded, 100);
  EXPECT_GT(tally.invalid, 100);
  EXPECT_GT(tally.malformed, 1000);
}

}  // namespace
}  // namespace ios::schema
