// Internal to schema/: a whole network under a schedule on the wire (the
// NetworkRun of farm.capnp), kept apart from protocol.cc's stage messages.
#pragma once

#include <memory>

#include "common/network_spec.h"
#include "schema/farm.capnp.h"

namespace ios::schema::detail {

void WriteNetwork(wire::NetworkRun::Builder out, const NetworkSpec& network);
//! Reads the network of a query that has one: refuses a stage beside it,
//! parses the graph (IOS JSON, shapes inferred) and checks that the stages
//! run every operator once in dependency order. Throws InvalidField
//! (schema/validate.h) naming the field and what is wrong.
std::shared_ptr<const NetworkSpec> ReadNetwork(wire::StageQuery::Reader query);

}  // namespace ios::schema::detail
