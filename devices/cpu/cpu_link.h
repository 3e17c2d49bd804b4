// Core groups of one cpu as devices, and the link between them: a tensor
// written by a thread of one group, copied into a host staging buffer and out
// into a buffer a thread of another group reads, as a multi-device cpu run
// moves it. Needs no oneDNN: built into every ios_devices.
#pragma once

#include <memory>
#include <vector>

#include "devices/backend.h"
#include "devices/registry.h"

namespace ios::devices {

//! The cores this process may run on (sched_getaffinity), ascending.
std::vector<int> AllowedCores();

//! `cores` cut into `groups` contiguous groups, sizes differing by at most
//! one. Throws ios::Error when groups < 1 or there are fewer cores than
//! groups (a group without a core is no device).
std::vector<std::vector<int>> SplitCores(const std::vector<int>& cores, int groups);

//! Times `query` over the host link from a thread pinned to `from` to one
//! pinned to `to` (either may be empty: not pinned): per size, one warm-up
//! copy, then `repeats` timed ones, each from the first memcpy's start (its
//! source just written by the first thread) to the end of the second. Owns
//! both threads and joins them before returning; never throws: an invalid
//! query, memory it cannot get, a thread it cannot pin or a fit FitLink
//! refuses come back as an error value.
LinkMeasurement MeasureHostLink(const LinkQuery& query, const std::vector<int>& from,
                                const std::vector<int>& to);

//! `stage_backend` (a cpu device's) as a backend owning `devices` core
//! groups of this process's cores: it measures stages as before and links
//! between groups 0 and 1 (MeasureHostLink). Throws ios::Error when the
//! cores cannot make `devices` groups.
std::unique_ptr<Backend> MakeCpuLinkBackend(std::unique_ptr<Backend> stage_backend, int devices);

//! `kind` (the cpu kind) with backends opened for BackendOptions::devices
//! > 1 wrapped by MakeCpuLinkBackend. Applied where the kind is registered.
BackendKind WithCpuLinks(BackendKind kind);

}  // namespace ios::devices
