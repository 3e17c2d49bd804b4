#include "worker/measuring_thread.h"

#include <spdlog/spdlog.h>

#include <cstdio>

#include "worker/farm_worker.h"

namespace ios::worker::measuring {
namespace {

void MeasureLoop(MeasuringState& state) {
  for (;;) {
    const schema::StageQuery* query = nullptr;
    {
      std::unique_lock lock(state.mutex);
      state.wake.wait(lock, [&] { return state.stopping || !state.queue.empty(); });
      if (state.stopping) return;
      state.current = std::move(state.queue.front());
      state.queue.pop_front();
      state.current_bound = MeasurementBound(state.current->timeout_ms, state.max_measurement);
      state.current_deadline = Clock::now() + state.current_bound;
      query = &*state.current;
    }
    schema::StageResult answer{query->query_id, {}};
    try {
      if (query->link) {
        // A failed link measurement is an answer like a failed stage.
        LinkMeasurement link = state.backend->MeasureLink(*query->link);
        answer.result.error = link.error;
        answer.result.error_message = link.error_message;
        if (link.ok()) answer.link = std::move(link);
      } else {
        answer.result =
            query->network != nullptr
                ? state.backend->MeasureNetwork(*query->network, query->batch_size, query->settings)
                : state.backend->Measure(query->stage, query->batch_size, query->settings);
      }
      // On the wire a timeout from a worker means "gave up, exiting" (the
      // coordinator drops the worker); a backend's own time limit is a
      // failure to measure again like any other.
      if (answer.result.error == MeasureError::kTimeout) {
        answer.result.error = MeasureError::kBackendFailure;
      }
    } catch (const std::exception& e) {
      // A backend must report expected failures as results; anything it
      // throws is still an answer, not the end of the worker.
      answer.result.error = MeasureError::kBackendFailure;
      answer.result.error_message = e.what();
    }
    std::string failure;
    if (!answer.result.ok()) {
      failure = "query " + std::to_string(query->query_id) + ": " + ToString(answer.result.error) +
                ": " + answer.result.error_message + " (" + query->Describe() + ")";
    }
    const bool lost = state.backend->Lost();
    {
      std::lock_guard lock(state.mutex);
      // Too late: the serving thread has answered this query and given the
      // worker up. The Worker may be gone; only `state` is still ours.
      if (state.abandoned) return;
      state.current.reset();
      ++(answer.result.ok() ? state.measured : state.failed);
      if (lost) {
        // Nothing more can be measured in this process: the serving
        // thread sends this answer and ends the worker (Run throws).
        state.device_lost = true;
        state.lost_reason = answer.result.error_message;
      }
      state.answers.push_back(std::move(answer));
    }
    if (!failure.empty()) spdlog::warn("{}", failure);
    state.doorbell.Ring();
    if (lost) return;
  }
}

}  // namespace

void MeasureThread(const std::shared_ptr<MeasuringState>& state) noexcept {
  try {
    MeasureLoop(*state);
  } catch (const std::exception& e) {
    // Out of memory, or a lock that failed: nothing more is measured, and
    // the coordinator's deadlines cover what was held.
    spdlog::error("worker {}: measuring thread: {}", state->worker_id, e.what());
  } catch (...) {
    spdlog::error("worker {}: measuring thread: unknown exception", state->worker_id);
  }
  std::lock_guard lock(state->mutex);
  if (state->abandoned) return;
  state->finished = true;
  state->ended.notify_all();
}

std::string SecondsText(milliseconds d) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", static_cast<double>(d.count()) / 1000);
  return text;
}

std::string HungText(const MeasuringState& state, const std::string& when) {
  return "query " + std::to_string(state.current->query_id) + " (" + state.current->Describe() +
         "): the measurement did not end within " + SecondsText(state.current_bound) + "; " + when;
}

}  // namespace ios::worker::measuring
