#include "common/printable.h"

#include <gtest/gtest.h>

namespace ios {
namespace {

TEST(PrintableTest, OrdinaryNamesAndUtf8PassUnchanged) {
  EXPECT_EQ(Printable("Mixed_6b.branch7x7dbl_3"), "Mixed_6b.branch7x7dbl_3");
  EXPECT_EQ(Printable("cell 7 / Zelle \xc3\xbc \xe2\x86\x92 \xf0\x9f\x99\x82"),
            "cell 7 / Zelle \xc3\xbc \xe2\x86\x92 \xf0\x9f\x99\x82");
}

TEST(PrintableTest, ControlCharactersAndTerminalEscapesAreEscaped) {
  EXPECT_EQ(Printable("a\nb\tc\rd"), "a\\nb\\tc\\rd");
  EXPECT_EQ(Printable("\x1b[2J\x1b]0;owned\x07"), "\\x1b[2J\\x1b]0;owned\\x07");
  EXPECT_EQ(Printable(std::string("nul\0del\x7f", 8)), "nul\\x00del\\x7f");
  EXPECT_EQ(Printable("back\\slash"), "back\\\\slash");
  // C1 controls (CSI is U+009B) and bytes that are not UTF-8.
  EXPECT_EQ(Printable("\xc2\x9b"
                      "31m"),
            "\\u009b31m");
  EXPECT_EQ(Printable("\xff\xc3(\xed\xa0\x80"), "\\xff\\xc3(\\xed\\xa0\\x80");
  EXPECT_EQ(Printable("\xe2\x86"), "\\xe2\\x86");  // truncated sequence
}

TEST(PrintableTest, QuotedShowsEmptyNamesAndEscapesQuotes) {
  EXPECT_EQ(Quoted(""), "''");
  EXPECT_EQ(Quoted("it's"), "'it\\'s'");
  EXPECT_EQ(Quoted("two\nlines"), "'two\\nlines'");
  EXPECT_EQ(Printable("it's"), "it's");
}

}  // namespace
}  // namespace ios
