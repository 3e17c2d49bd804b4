// How the profiling DB keeps a stage's canonical key compact (schema v2,
// docs/profiling-db.md): the key is found by two independent 64-bit hashes
// of its text (common/stage_key_hash.h: one is the row id, the other checks
// it), and the text itself,
// with the stage's description, is stored deflated against a built-in
// dictionary of the key grammar's common fragments, so it can always be
// read back (ios-db, debugging) at ~1/8 of its size.
#pragma once

#include <string>
#include <string_view>

namespace ios::db {

//! A stage's key and description, as stored.
struct StageText {
  std::string key, description;
};

//! Deflates `text` against the built-in dictionary (format byte first).
//! Deterministic: equal texts give equal bytes.
std::string PackStageText(const StageText& text);
//! The inverse. Throws ios::Error when `packed` is not a packed stage text.
//! A description stored empty (searches store none since it follows from
//! the key: ~50 bytes a stage) is derived from the key (DescribeStageKey).
StageText UnpackStageText(std::string_view packed);

//! Deflates a long text without the stage dictionary (its own format byte):
//! what a search's stored report (searches.report, schema 5) is kept as,
//! JSON that shrinks to about a fifth.
std::string PackLongText(std::string_view text);
//! The inverse. Throws ios::Error when `packed` is not a packed long text.
std::string UnpackLongText(std::string_view packed);

//! StageSpec::Describe() of the stage whose key is `key`; empty when `key`
//! is not a canonical stage key.
std::string DescribeStageKey(std::string_view key);

}  // namespace ios::db
