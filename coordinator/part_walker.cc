#include "coordinator/part_walker.h"

#include <utility>

namespace ios::coordinator {

PartWalker::PartWalker(const Graph& graph, const std::vector<std::vector<NodeId>>& parts,
                       const std::vector<bool>& walk, const DpOptions& options)
    : graph_(graph),
      parts_(parts),
      walk_(walk),
      options_(options),
      slots_(parts.size()),
      thread_([this](std::stop_token stop) { Run(stop); }) {}

PartWalker::~PartWalker() {
  thread_.request_stop();
  // jthread joins in its destructor, before the members it uses go.
}

void PartWalker::Run(const std::stop_token& stop) noexcept {
  for (size_t i = 0; i < parts_.size(); ++i) {
    std::optional<PartSpace> space;
    if (i < walk_.size() && walk_[i] && !stop.stop_requested()) {
      try {
        space = PartSpace::Enumerate(graph_, parts_[i], options_, [this](const DpProgress& p) {
          const std::lock_guard lock(mutex_);
          progress_ = p;
          changed_.notify_all();
        });
      } catch (...) {
        // Over a budget or invalid: the planning thread walks this part
        // itself, with the budget it has left, and sees the error there.
        space.reset();
      }
    }
    const std::lock_guard lock(mutex_);
    slots_[i].space = std::move(space);
    slots_[i].done = true;
    progress_.reset();
    changed_.notify_all();
  }
}

std::optional<PartSpace> PartWalker::Take(size_t i, const DpProgressFn& progress) {
  std::unique_lock lock(mutex_);
  while (!slots_.at(i).done) {
    changed_.wait(lock);
    if (progress_ && progress) {
      const DpProgress latest = *progress_;
      progress_.reset();
      lock.unlock();
      progress(latest);
      lock.lock();
    }
  }
  return std::exchange(slots_[i].space, std::nullopt);
}

}  // namespace ios::coordinator
