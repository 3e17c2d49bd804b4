#include "common/watts_strogatz.h"

#include <algorithm>
#include <set>
#include <string>

#include "common/error.h"

namespace ios::zoo {
namespace {

// splitmix64 (Steele, Lea and Flood 2014): tiny, seedable with any value,
// and good enough for drawing graphs. Local to one call: no global state.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t Next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  //! Uniform in [0, 1), 53 random bits.
  double Unit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  //! Uniform in [0, n), n > 0; rejection keeps it unbiased.
  int Below(int n) {
    const uint64_t range = static_cast<uint64_t>(n);
    const uint64_t limit = UINT64_MAX - UINT64_MAX % range;
    uint64_t x = Next();
    while (x >= limit) x = Next();
    return static_cast<int>(x % range);
  }

 private:
  uint64_t state_;
};

}  // namespace

WsGraph WattsStrogatz(int n, int k, double p, uint64_t seed) {
  const std::string where = "WattsStrogatz(n=" + std::to_string(n) + ", k=" + std::to_string(k) +
                            ", p=" + std::to_string(p) + ")";
  if (n < 2) throw Error(where + ": n must be at least 2");
  if (k <= 0 || k >= n || k % 2 != 0) {
    throw Error(where + ": k must be even and between 2 and n-1");
  }
  if (!(p >= 0 && p <= 1)) throw Error(where + ": p must be a probability in [0, 1]");

  std::vector<std::set<int>> adjacent(n);
  auto link = [&](int u, int v) {
    adjacent[u].insert(v);
    adjacent[v].insert(u);
  };
  for (int j = 1; j <= k / 2; ++j) {
    for (int u = 0; u < n; ++u) link(u, (u + j) % n);
  }

  SplitMix64 rng(seed);
  for (int j = 1; j <= k / 2; ++j) {
    for (int u = 0; u < n; ++u) {
      const int v = (u + j) % n;
      if (rng.Unit() >= p) continue;
      // (u, v) is still there: a step removes only the edge it moves, and
      // adds only an edge that was absent, so never a lattice edge to come.
      if (static_cast<int>(adjacent[u].size()) >= n - 1) continue;
      int w = rng.Below(n);
      while (w == u || adjacent[u].count(w)) w = rng.Below(n);
      adjacent[u].erase(v);
      adjacent[v].erase(u);
      link(u, w);
    }
  }

  WsGraph graph;
  graph.num_nodes = n;
  for (int u = 0; u < n; ++u) {
    for (int v : adjacent[u]) {
      if (u < v) graph.edges.emplace_back(u, v);
    }
  }
  return graph;
}

}  // namespace ios::zoo
