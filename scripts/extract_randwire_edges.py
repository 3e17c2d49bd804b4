#!/usr/bin/env python3
"""Prints the wiring of the four RandWire stages as C++ arrays for
common/zoo_randwire.cc, read from the IOS reference implementation's export
(../shared/fixtures/ios-reference/models/randwire.json by default).

The stages are Watts-Strogatz graphs (WS(16,4,0.75) and three WS(32,4,0.75))
that the reference generated once with networkx; they cannot be regenerated,
so ios-farm embeds them. Nodes are renumbered 0..n-1 in the order the
reference creates them (a topological order). For each node the edges into
it are listed in the order its inputs are summed, and `outputs` lists the
nodes without successors in the order the stage's exit sums them.

Usage: scripts/extract_randwire_edges.py [path/to/randwire.json]
"""
import json
import os
import sys


def stage_wiring(block):
    """Returns (num_nodes, edges, outputs) of one RandWire stage block."""
    nodes = block["inner_nodes"]
    index = {node["name"]: i for i, node in enumerate(nodes)}
    edges = []
    for i, node in enumerate(nodes):
        assert node["type"] == "sequential", node["name"]
        terms = node["nodes"][0]["inputs"]
        assert len(terms) == 1, node["name"]
        producers = [producer for producer, _, _ in terms[0]]
        if producers == [block["enter_name"]]:
            continue  # a source: reads the stage input with stride 2
        edges += [(index[p], i) for p in producers]
    exit_terms = block["exit_node"]["inputs"]
    assert block["exit_node"]["type"] == "identity" and len(exit_terms) == 1
    outputs = [index[producer] for producer, _, _ in exit_terms[0]]
    return len(nodes), edges, outputs


def main():
    default = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "fixtures",
                           "ios-reference", "models", "randwire.json")
    path = sys.argv[1] if len(sys.argv) > 1 else default
    with open(path) as f:
        model = json.load(f)
    stages = [b for b in model["blocks"] if b["inner_nodes"] and
              b["inner_nodes"][0].get("hint_name") == "ReluSepConv"]
    assert len(stages) == 4, len(stages)
    for s, block in enumerate(stages):
        n, edges, outputs = stage_wiring(block)
        print(f"// Stage {s + 2}: {n} nodes, {len(edges)} edges.")
        print(f"constexpr int kStage{s + 2}Nodes = {n};")
        print(f"constexpr Edge kStage{s + 2}Edges[] = {{")
        line = "   "
        for u, v in edges:
            item = f" {{{u}, {v}}},"
            if len(line) + len(item) > 98:
                print(line)
                line = "   "
            line += item
        print(line)
        print("};")
        print(f"constexpr int kStage{s + 2}Outputs[] = {{{', '.join(map(str, outputs))}}};")
        print()


if __name__ == "__main__":
    main()
