#!/usr/bin/env python3
"""Writes an IOS JSON model too wide for an exact DP: one block of WIDTH
independent convolutions (1x1, 3x3, 5x5 in turn) in DEPTH layers (layer k+1's
i-th conv reads layer k's i-th) and a concat of the last layer.

    bench/wide_block.py WIDTH [DEPTH] > wide.json
"""
import json
import sys


def wide_block(width, depth):
    source = {"type": "placeholder", "name": "in", "output_shape": [16, 16, 16]}
    nodes, previous = [], ["in"] * width
    for layer in range(depth):
        current = []
        for i in range(width):
            k = (1, 3, 5)[i % 3]
            name = f"s{layer}_c{i}"
            nodes.append({"type": "conv", "name": name, "inputs": [[[previous[i], 0, 16]]],
                          "out_channels": 16, "kernel": [k, k], "stride": [1, 1],
                          "padding": [k // 2, k // 2], "groups": 1, "act": "relu"})
            current.append(name)
        previous = current
    concat = {"type": "identity", "name": "concat", "inputs": [[[p, 0, 16]] for p in previous]}
    return {"name": f"wide{width}x{depth}", "input": source,
            "blocks": [{"enter_name": "in", "enter_node": source, "inner_nodes": nodes,
                        "exit_node": concat}]}


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    json.dump(wide_block(int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) == 3 else 1),
              sys.stdout)
    print()
