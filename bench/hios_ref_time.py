#!/usr/bin/env python3
"""Times the HIOS reference simulator (SHUs-Lab/HIOS, simulation/, commit 1e774de)
on hios-sim fixture instances, so that our scheduler's speed can be compared with
it in the same run (issue 23).

    /usr/bin/python3 bench/hios_ref_time.py --ref DIR [options] INSTANCE.json...

DIR is a checkout of the reference (the repository root or its simulation/
folder); $HIOS_REF is used when --ref is not given. Nothing of the reference is
part of this project: it is imported from DIR at run time.

Each instance is run the way the reference's main.py runs it: the graph is built
as read_graph builds it (nodes 0..N-1 in id order with weight and utilization,
edges in the stored order with their transfer as weight, gpu = -1), then
  HIOS-LP: hios_lp (mapping), set_successors, graph_latency (inter-GPU latency),
           intra_op_parallelism(window 2, streams 2) (sliding window)
  HIOS-MR: on a fresh graph, hios_pdp, graph_latency, intra_op_parallelism with
           the successor lists of the LP run (as main.py does).
lp_s and mr_s are the sums of those phases (time.perf_counter, the reference's
prints sent to /dev/null). lp_ms / mr_ms are the latencies the reference
computes; ok=1 when they equal the instance's results_upstream_code (hios_lp,
hios_mr, lp_inter_only, mr_inter_only, within 1e-6) and the final GPU mappings
equal lp_gpu_of / mr_gpu_of, i.e. when we ran what the fixture recorded.

Instances whose upstream run failed (results_upstream_code.error set: the
reference crashes or loops forever on them) are refused unless --include-failed.

Output: one line per instance, then one mean line over the instances with ok=1.
Exit status: 0 when every instance ran and matched, 1 otherwise, 2 on bad usage.
"""
import argparse
import contextlib
import gc
import json
import os
import signal
import sys
import time

TOLERANCE = 1e-6


class InstanceTimeout(Exception):
    pass


def fail(message):
    print(f"hios_ref_time: {message}", file=sys.stderr)
    sys.exit(2)


def import_reference(ref_dir):
    """Returns (nx, optimizer_sim) with the reference's simulation/ on sys.path."""
    try:
        import networkx as nx
    except ImportError:
        fail(f"networkx is not importable by {sys.executable}; the reference needs it "
             "(use /usr/bin/python3 or install networkx)")
    candidates = [os.path.join(ref_dir, "simulation"), ref_dir]
    sim_dir = next((d for d in candidates if os.path.isfile(os.path.join(d, "optimizer_sim.py"))),
                   None)
    if sim_dir is None:
        fail(f"reference path '{ref_dir}' has neither optimizer_sim.py nor "
             "simulation/optimizer_sim.py (expected a SHUs-Lab/HIOS checkout)")
    sys.path.insert(0, os.path.abspath(sim_dir))
    import optimizer_sim
    return nx, optimizer_sim


def build_graph(nx, instance):
    """The graph main.py's read_graph builds, plus the gpu = -1 main.py sets before mapping."""
    graph = nx.DiGraph(latency=0)
    operators = sorted(instance["operators"], key=lambda op: op["id"])
    for op in operators:
        graph.add_node(op["id"], weight=op["time"])
        graph.add_node(op["id"], utilization=op["utilization"])
    # Edge order matters: the reference's networkx topological sorts (and so its
    # tie-breaking) follow insertion order, and the fixture keeps the order it used.
    for edge in instance["edges"]:
        graph.add_edge(edge["src"], edge["dst"], weight=edge["transfer"])
    for op in operators:
        graph.nodes[op["id"]]["gpu"] = -1
    return graph


def timed(phases, name, function, *args):
    start = time.perf_counter()
    result = function(*args)
    phases[name] = time.perf_counter() - start
    return result


def run_reference(nx, opt, instance):
    """Runs HIOS-LP then HIOS-MR as main.py does; returns phase times, latencies, mappings."""
    gen = instance["generator"]
    ngpu, window, streams = gen["num_gpus"], gen["window_size"], gen["max_num_streams"]
    src, dst = 0, gen["num_operators"] - 1
    phases, out = {}, {}

    lp_graph = build_graph(nx, instance)
    timed(phases, "lp_map", opt.hios_lp, lp_graph, src, dst, ngpu)
    successors = {}
    timed(phases, "lp_succ", opt.set_successors, lp_graph, successors)
    out["lp_inter_only"] = timed(phases, "lp_eval", opt.graph_latency, lp_graph, src, dst, ngpu)
    out["lp_gpu_of"] = {n: lp_graph.nodes[n]["gpu"] for n in lp_graph.nodes}
    out["hios_lp"] = timed(phases, "lp_intra", opt.intra_op_parallelism, lp_graph, successors,
                           window, streams, ngpu, src, dst)

    mr_graph = build_graph(nx, instance)
    timed(phases, "mr_map", opt.hios_pdp, mr_graph, src, dst, ngpu)
    out["mr_inter_only"] = timed(phases, "mr_eval", opt.graph_latency, mr_graph, src, dst, ngpu)
    out["mr_gpu_of"] = {n: mr_graph.nodes[n]["gpu"] for n in mr_graph.nodes}
    out["hios_mr"] = timed(phases, "mr_intra", opt.intra_op_parallelism, mr_graph, successors,
                           window, streams, ngpu, src, dst)
    return phases, out


def mismatches(recorded, computed):
    """Names of the recorded results the run did not reproduce."""
    bad = []
    for key in ("lp_inter_only", "hios_lp", "mr_inter_only", "hios_mr"):
        if recorded.get(key) is None or abs(recorded[key] - computed[key]) > TOLERANCE:
            bad.append(key)
    for key in ("lp_gpu_of", "mr_gpu_of"):
        stored = {int(k): v for k, v in (recorded.get(key) or {}).items()}
        if stored != computed[key]:
            bad.append(key)
    return bad


def on_alarm(signum, frame):
    raise InstanceTimeout()


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Example: /usr/bin/python3 bench/hios_ref_time.py --ref /tmp/hios-ref "
               "build/fixtures/hios-sim/hios-instances/*seed[0-7].json")
    parser.add_argument("instances", nargs="+", metavar="INSTANCE.json",
                        help="hios-sim-instance/v1 files (FORMAT.md of the hios-sim fixtures)")
    parser.add_argument("--ref", default=os.environ.get("HIOS_REF"),
                        help="the reference checkout (repo root or simulation/); default $HIOS_REF")
    parser.add_argument("--timeout", type=int, default=120, metavar="S",
                        help="seconds per instance before it is abandoned (default 120)")
    parser.add_argument("--include-failed", action="store_true",
                        help="also run instances the upstream run failed on (they crash or spin)")
    args = parser.parse_args()
    if not args.ref:
        fail("no reference path: pass --ref DIR or set HIOS_REF")
    if not os.path.isdir(args.ref):
        fail(f"reference path '{args.ref}' is not a directory")
    if args.timeout <= 0:
        fail(f"--timeout must be a positive number of seconds, got {args.timeout}")
    nx, opt = import_reference(args.ref)
    # main.py raises the limit too; the reference's path check recurses once per dropped vertex.
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20000))
    signal.signal(signal.SIGALRM, on_alarm)

    all_ok, good = True, []
    for path in args.instances:
        name = os.path.basename(path)
        try:
            with open(path) as f:
                instance = json.load(f)
            missing = [k for k in ("generator", "operators", "edges", "results_upstream_code")
                       if k not in instance]
            if missing:
                raise KeyError(f"no field {', '.join(missing)}")
            recorded = instance["results_upstream_code"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            print(f"instance={name} ok=0 error=unreadable ({type(e).__name__}: {e})", flush=True)
            all_ok = False
            continue
        if recorded.get("error") and not args.include_failed:
            print(f"instance={name} skipped=upstream_failed (the reference crashes or spins on "
                  "it; --include-failed runs it)", flush=True)
            continue
        gc.collect()
        signal.alarm(args.timeout)
        try:
            with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
                phases, computed = run_reference(nx, opt, instance)
        except InstanceTimeout:
            print(f"instance={name} ok=0 error=timeout after {args.timeout} s", flush=True)
            all_ok = False
            continue
        except Exception as e:  # the reference's own failures (e.g. its empty-path crash)
            print(f"instance={name} ok=0 error=reference raised {type(e).__name__}: {e}", flush=True)
            all_ok = False
            continue
        finally:
            signal.alarm(0)
        lp_s = phases["lp_map"] + phases["lp_succ"] + phases["lp_eval"] + phases["lp_intra"]
        mr_s = phases["mr_map"] + phases["mr_eval"] + phases["mr_intra"]
        bad = mismatches(recorded, computed)
        ok = not bad
        all_ok = all_ok and ok
        if ok:
            good.append((lp_s, mr_s))
        detail = " ".join(f"{k}_s={v:.4f}" for k, v in phases.items())
        print(f"instance={name} lp_s={lp_s:.4f} mr_s={mr_s:.4f} lp_ms={computed['hios_lp']:.6f} "
              f"mr_ms={computed['hios_mr']:.6f} ok={int(ok)} {detail}"
              + (f" mismatch={','.join(bad)}" if bad else ""), flush=True)
    if good:
        n = len(good)
        print(f"mean instances={n} lp_s={sum(g[0] for g in good) / n:.4f} "
              f"mr_s={sum(g[1] for g in good) / n:.4f}", flush=True)
    else:
        print("mean instances=0 (no instance ran and matched)", flush=True)
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
