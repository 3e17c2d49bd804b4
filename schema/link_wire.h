// Internal to schema/: what a worker says of itself (Hello, with its devices
// and links, protocol 7) and link queries and their answers on the wire,
// kept apart from protocol.cc's stage messages.
#pragma once

#include "common/link_measurement.h"
#include "schema/farm.capnp.h"
#include "schema/protocol.h"

namespace ios::schema::detail {

void WriteHello(wire::Hello::Builder out, const Hello& hello);
//! Reads a Hello under the list budgets (properties, links); values are
//! checked by Validate.
Hello ReadHello(wire::Hello::Reader in);

void WriteLinkQuery(wire::LinkQuery::Builder out, const LinkQuery& link);
//! Reads the link of a query that has one: refuses a stage beside it and
//! more sizes than kMaxLinkSizes. Throws InvalidField (schema/validate.h).
LinkQuery ReadLinkQuery(wire::StageQuery::Reader query);

void WriteLinkResult(wire::LinkResult::Builder out, const LinkMeasurement& link);
LinkMeasurement ReadLinkResult(wire::LinkResult::Reader in);

}  // namespace ios::schema::detail
