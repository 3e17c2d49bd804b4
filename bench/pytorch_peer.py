#!/usr/bin/python3
"""PyTorch peer of the cpu end-to-end benchmark (issue 8): times torchvision's
Inception V3 and SqueezeNet, rebuilt to be the same networks as our zoo
models, in eager mode and as a frozen, inference-optimised TorchScript model.

    bench/pytorch_peer.py --model inception_v3,squeezenet --batch 1,8 --threads 2 --runs 5
    bench/pytorch_peer.py --check-shapes [--model squeezenet]

Prints one JSON object per (model, batch, mode) on stdout:

    {"peer": "pytorch", "model": "inception_v3", "batch": 1, "threads": 2,
     "mode": "eager" | "jit_frozen", "runs": 5, "warmup": 3,
     "measured_ms": {"min": .., "median": .., "max": ..}, "output_shape": [1, 2048],
     "torch": "1.13.0a0", "torchvision": "0.14.1a0", "blas": "/usr/lib/.../libblas.so.3.11.0",
     "onednn": "/usr/lib/.../libdnnl.so.2.6", "load_avg_1m": [before, after],
     "cpu_pressure_avg10": [before, after]}

The last two say how busy the machine was (load average; % of the last 10 s
in which some task waited for a CPU, from /proc/pressure/cpu): on a shared
machine, trust a timing only when both are low.

Both modes: random weights from a fixed seed, eval mode, torch.no_grad(),
FP32, NCHW input uniform in [0, 1). "jit_frozen" is the traced model after
torch.jit.freeze and torch.jit.optimize_for_inference.

How the models are made equal to ours (common/zoo.cc, docs/models.md):
- inception_v3: torchvision's Inception3 with aux_logits=False (the aux
  classifier only runs in training anyway), transform_input=False, every
  BatchNorm folded into its convolution (conv+bias+relu, as in our zoo), and
  dropout and fc replaced by identities: our model ends at the global
  average pool (2048 channels).
- squeezenet: torchvision's squeezenet1_0 changed to our SqueezeNet v1.0
  with complex bypass: conv1 padded by 3 (112x112 after it, torchvision has
  no padding), max pools with floor instead of ceil rounding, each fire
  module concatenating expand3x3 before expand1x1 and adding a bypass (a
  1x1 conv+relu of its input in fire2/4/6/8, the input itself in
  fire3/5/7/9), dropout replaced by an identity. It has no BatchNorm.
What stays different: torchvision flattens the pooled output to N x C (a
view, no arithmetic; ours is N x C x 1 x 1), and PyTorch applies each relu
as an operator of its own, eager and frozen alike (ours fuses it into the
convolution).

--check-shapes traces each model with torch.fx and compares it operator by
operator (kind, parameters, output shape, and which operators each one
reads, in the order it reads them) with the IOS reference export of our zoo
model (--reference DIR, default ../shared/fixtures/ios-reference/models/
next to the repository; tests/common/zoo_test.cc checks the zoo equals those
files), and checks that folding BatchNorm did not change Inception's output.
Exit status 1 if anything differs.
"""
import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.fx
import torchvision
from torch import nn
from torch.fx.passes.shape_prop import ShapeProp
from torch.nn.utils.fusion import fuse_conv_bn_eval

INPUT_SIZE = {"inception_v3": 299, "squeezenet": 224}
SEED = 20261123


def he_uniform_(conv, generator):
    """He-uniform kernel and small bias, like exec/weights.h, so activations
    stay of order one through the network (no denormals, no overflow)."""
    fan_in = conv.in_channels // conv.groups * conv.kernel_size[0] * conv.kernel_size[1]
    bound = (6.0 / fan_in) ** 0.5
    with torch.no_grad():
        conv.weight.copy_(torch.rand(conv.weight.shape, generator=generator) * 2 * bound - bound)
        if conv.bias is not None:
            conv.bias.copy_(torch.rand(conv.bias.shape, generator=generator) * 0.2 - 0.1)


def uniform(shape, low, high, generator):
    return torch.rand(shape, generator=generator) * (high - low) + low


def inception_v3(generator, fold=True):
    """Inception V3 as in our zoo: no aux classifier, no dropout or fc, and
    (with `fold`) BatchNorm folded into the convolutions."""
    model = torchvision.models.inception_v3(weights=None, aux_logits=False, init_weights=False,
                                            transform_input=False)
    model.dropout = nn.Identity()
    model.fc = nn.Identity()
    for module in model.modules():
        if isinstance(module, torchvision.models.inception.BasicConv2d):
            he_uniform_(module.conv, generator)
            bn = module.bn
            with torch.no_grad():  # random statistics, so the fold has real work to do
                bn.weight.copy_(uniform(bn.weight.shape, 0.8, 1.2, generator))
                bn.bias.copy_(uniform(bn.bias.shape, -0.1, 0.1, generator))
                bn.running_mean.copy_(uniform(bn.running_mean.shape, -0.1, 0.1, generator))
                bn.running_var.copy_(uniform(bn.running_var.shape, 0.8, 1.2, generator))
    model.eval()
    if fold:
        fold_batch_norm(model)
    return model


def fold_batch_norm(model):
    """Replaces each BasicConv2d's conv+bn by one convolution with bias."""
    for module in model.modules():
        if isinstance(module, torchvision.models.inception.BasicConv2d):
            module.conv = fuse_conv_bn_eval(module.conv, module.bn)
            module.bn = nn.Identity()


class FireWithBypass(nn.Module):
    """torchvision's Fire module in our zoo's form: concatenation of expand3x3
    then expand1x1, plus `bypass` of the module's input (SqueezeNet's
    complex bypass)."""

    def __init__(self, fire, bypass):
        super().__init__()
        self.fire = fire
        self.bypass = bypass

    def forward(self, x):
        s = self.fire.squeeze_activation(self.fire.squeeze(x))
        e3 = self.fire.expand3x3_activation(self.fire.expand3x3(s))
        e1 = self.fire.expand1x1_activation(self.fire.expand1x1(s))
        return torch.cat([e3, e1], 1) + self.bypass(x)


def squeezenet(generator):
    """SqueezeNet v1.0 with complex bypass, as in our zoo."""
    model = torchvision.models.squeezenet1_0(weights=None)
    features = list(model.features)
    features[0].padding = (3, 3)
    fire_index = 0
    for i, layer in enumerate(features):
        if isinstance(layer, nn.MaxPool2d):
            layer.ceil_mode = False
        elif isinstance(layer, torchvision.models.squeezenet.Fire):
            fire_index += 1  # fire2 .. fire9
            if fire_index % 2 == 1:  # fire2, fire4, fire6, fire8: 1x1 conv+relu bypass
                out_channels = layer.expand1x1.out_channels + layer.expand3x3.out_channels
                bypass = nn.Sequential(nn.Conv2d(layer.squeeze.in_channels, out_channels, 1),
                                       nn.ReLU(inplace=True))
            else:
                bypass = nn.Identity()
            features[i] = FireWithBypass(layer, bypass)
    model.features = nn.Sequential(*features)
    model.classifier[0] = nn.Identity()  # dropout
    for module in model.modules():
        if isinstance(module, nn.Conv2d):
            he_uniform_(module, generator)
    return model.eval()


def export_script():
    """scripts/export-torchvision.py as a module: its build_model is the
    network and the weights the ONNX benchmark imports."""
    import importlib.util
    path = Path(__file__).resolve().parent.parent / "scripts" / "export-torchvision.py"
    spec = importlib.util.spec_from_file_location("export_torchvision", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def torchvision_name(name):
    """"torchvision:resnet50" -> "resnet50"; None for our zoo's models."""
    return name.split(":", 1)[1] if name.startswith("torchvision:") else None


def input_size(name):
    tv = torchvision_name(name)
    if tv is None:
        return INPUT_SIZE[name]
    script = export_script()
    return script.INPUT_SIZE.get(tv, script.DEFAULT_INPUT_SIZE)


def build(name, generator):
    tv = torchvision_name(name)
    if tv is not None:
        # Exactly what scripts/export-torchvision.py writes to MODEL.onnx
        # (its default seed and He init), unfolded: PyTorch runs the
        # torchvision model as a user has it.
        script = export_script()
        return script.build_model(tv, script.DEFAULT_SEED, "he")
    if name == "inception_v3":
        return inception_v3(generator)
    if name == "squeezenet":
        return squeezenet(generator)
    raise SystemExit(f"pytorch_peer.py: unknown model '{name}' (known: inception_v3, squeezenet)")


def frozen(model, example):
    traced = torch.jit.trace(model, example)
    return torch.jit.optimize_for_inference(torch.jit.freeze(traced))


def time_runs(run, warmup, runs, sync=lambda: None):
    """Milliseconds per run; `sync` waits for the device (a GPU runs
    asynchronously: the clock stops when its work is done, not queued)."""
    for _ in range(warmup):
        run()
    sync()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        sync()
        times.append((time.perf_counter() - start) * 1e3)
    return {"min": round(min(times), 3), "median": round(statistics.median(times), 3),
            "max": round(max(times), 3)}


def loaded_library(stem):
    """The file a shared library resolved to in this process (e.g. which
    libblas.so.3 the alternatives system picked), or None."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if os.path.basename(path).startswith(stem):
                return os.path.realpath(path)
    return None


def machine_load():
    """1-minute load average and the share of the last 10 s in which some
    runnable task waited for a CPU (Linux PSI), to judge a timing on a
    shared machine."""
    pressure = None
    try:
        with open("/proc/pressure/cpu") as psi:
            pressure = float(psi.readline().split()[1].split("=")[1])
    except (OSError, IndexError, ValueError):
        pass
    return round(os.getloadavg()[0], 2), pressure


def graph_replay(model, x):
    """torch.cuda.graphs: the model captured once on a side stream after a
    few warm-up runs (as PyTorch's documentation does it), replayed on the
    static input."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            model(x)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = model(x)
    def replay():
        graph.replay()
        return static_out
    return replay


def benchmark(args):
    torch.set_num_threads(args.threads)
    gpu = args.device == "cuda"
    if gpu:
        # Strict FP32, as ios-run's cuda device with math=fp32.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = True  # like our per-shape algorithm search
    libraries = {"blas": loaded_library("libblas.so"), "onednn": loaded_library("libdnnl.so")}
    if gpu:
        libraries = {"gpu": torch.cuda.get_device_name(0), "cudnn": torch.backends.cudnn.version()}
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    for name in args.model:
        for batch in args.batch:
            generator = torch.Generator().manual_seed(SEED)
            model = build(name, generator)
            size = input_size(name)
            x = torch.rand((batch, 3, size, size), generator=generator)
            if gpu:
                model, x = model.cuda(), x.cuda()
            with torch.no_grad():
                for mode in args.mode:
                    if mode == "cuda_graph":
                        replay = graph_replay(model, x)
                        runnable = lambda _: replay()
                    elif mode == "compile":
                        # Compiled at its first calls (the warm-up runs);
                        # reduce-overhead replays CUDA graphs on a GPU.
                        runnable = torch.compile(model, mode="reduce-overhead")
                    else:
                        runnable = model if mode == "eager" else frozen(model, x)
                    output = runnable(x)
                    load_before = machine_load()
                    measured = time_runs(lambda: runnable(x), args.warmup, args.runs, sync)
                    load_after = machine_load()
                    print(json.dumps({
                        "peer": "pytorch", "model": name, "batch": batch, "threads": args.threads,
                        "device": args.device,
                        "mode": mode, "runs": args.runs, "warmup": args.warmup,
                        "measured_ms": measured, "output_shape": list(output.shape),
                        "torch": torch.__version__, "torchvision": torchvision.__version__,
                        **libraries, "load_avg_1m": [load_before[0], load_after[0]],
                        "cpu_pressure_avg10": [load_before[1], load_after[1]]}), flush=True)


# ---- --check-shapes: operator-by-operator comparison with the IOS export ----


def ios_ops(path):
    """The operators of an IOS reference JSON model in file order, each as
    (description, [indices of the operators it reads, per term]); the input
    is index -1. Concatenations and sums are identity operators."""
    model = json.loads(Path(path).read_text())
    index = {model["input"]["name"]: -1}
    ops = []
    for block in model["blocks"]:
        for node in block["inner_nodes"] + [block["exit_node"]]:
            terms = []
            for term in node["inputs"]:
                slices = []
                for producer, begin, end in term:
                    slices.append(index[producer])
                    if begin != 0:
                        slices.append(f"slice {begin}:{end}")
                terms.append(slices)
            shape = node["output_shape"]
            if node["type"] == "conv":
                desc = ("conv", node["out_channels"], tuple(node["kernel"]), tuple(node["stride"]),
                        tuple(node["padding"]), node["groups"], node["act"], tuple(shape))
            elif node["type"] == "pool":
                desc = ("pool", node["pool_type"], tuple(node["kernel"]), tuple(node["stride"]),
                        tuple(node["padding"]), tuple(shape))
            elif node["type"] == "identity" and len(terms) > 1:
                desc = ("concat", tuple(shape))
            elif node["type"] == "identity":
                desc = ("sum", tuple(shape))
            else:
                desc = (node["type"], tuple(shape))
            index[node["name"]] = len(ops)
            reads = [t[0] for t in terms] if desc[0] == "concat" else terms[0]
            ops.append((desc, reads))
    return ops


def torch_ops(model, size):
    """The same list for a torch model, from a torch.fx trace with shapes:
    relus fold into the convolution they follow, a concatenation of a
    concatenation into one, and identities, flatten and dropout are views."""
    graph_module = torch.fx.symbolic_trace(model)
    ShapeProp(graph_module).propagate(torch.rand(1, 3, size, size))
    modules = dict(graph_module.named_modules())
    alias, where, concat_terms, readers, inner = {}, {}, {}, {}, set()
    ops = []

    def source(node):
        while node in alias:
            node = alias[node]
        return node

    def index(node):
        node = source(node)
        return -1 if node.op == "placeholder" else where[node]

    def shape(node):
        return tuple(node.meta["tensor_meta"].shape[1:])

    def emit(node, desc, reads):
        where[node] = len(ops)
        for r in reads:
            readers[r] = readers.get(r, 0) + 1
        ops.append((list(desc), reads))

    for node in graph_module.graph.nodes:
        target = modules.get(node.target) if node.op == "call_module" else node.target
        name = getattr(target, "__name__", type(target).__name__)
        if node.op in ("placeholder", "output"):
            continue
        if isinstance(target, (nn.Identity, nn.Dropout)) or name == "flatten":
            alias[node] = node.args[0]
        elif isinstance(target, nn.ReLU) or name == "relu":
            producer = index(node.args[0])
            conv = ops[producer][0] if producer >= 0 else None
            if conv and conv[0] == "conv" and conv[6] == "none" and readers.get(producer, 0) == 0:
                conv[6] = "relu"
                alias[node] = node.args[0]
            else:
                emit(node, ("relu", shape(node)), [producer])
        elif isinstance(target, nn.Conv2d):
            emit(node, ("conv", target.out_channels, target.kernel_size, target.stride,
                        target.padding, target.groups, "none", shape(node)),
                 [index(node.args[0])])
        elif isinstance(target, (nn.MaxPool2d, nn.AvgPool2d)) or name in ("max_pool2d",
                                                                           "avg_pool2d"):
            if isinstance(target, nn.Module):
                kind = "max" if isinstance(target, nn.MaxPool2d) else "avg"
                k, s, p = target.kernel_size, target.stride, target.padding
                ceil = target.ceil_mode
                counts_pad = getattr(target, "count_include_pad", True)
            else:
                kind = "max" if name == "max_pool2d" else "avg"
                kwargs = dict(zip(("kernel_size", "stride", "padding"), node.args[1:]))
                kwargs.update(node.kwargs)
                k, s, p = kwargs["kernel_size"], kwargs.get("stride"), kwargs.get("padding", 0)
                ceil = kwargs.get("ceil_mode", False)
                counts_pad = kwargs.get("count_include_pad", True)
            pair = lambda v: tuple(v) if isinstance(v, (tuple, list)) else (v, v)
            desc = ("pool", kind, pair(k), pair(s if s else k), pair(p), shape(node))
            if ceil or not counts_pad:  # ours: floor rounding, average counts padding
                desc += ("ceil_mode" if ceil else "", "" if counts_pad else "excludes padding")
            emit(node, desc, [index(node.args[0])])
        elif isinstance(target, nn.AdaptiveAvgPool2d):
            in_shape = node.args[0].meta["tensor_meta"].shape
            emit(node, ("pool", "global_avg", tuple(in_shape[2:]), (1, 1), (0, 0), shape(node)),
                 [index(node.args[0])])
        elif name == "cat":
            terms = []
            for arg in node.args[0]:
                src = source(arg)
                if src in concat_terms:
                    inner.add(where[src])
                terms += concat_terms.get(src, [index(src)])
            concat_terms[node] = terms
            emit(node, ("concat", shape(node)), terms)
        elif name == "add":
            emit(node, ("sum", shape(node)), [index(a) for a in node.args])
        else:
            emit(node, (f"unknown {node.op} {name}", shape(node)), [])
    # A concatenation read by another concatenation is not an operator of its
    # own in ours (Inception E): drop it and renumber.
    if any(r in inner for desc, reads in ops if desc[0] != "concat" for r in reads):
        raise SystemExit("pytorch_peer.py: a nested concatenation is also read by another operator")
    renumber, kept = {-1: -1}, []
    for i, (desc, reads) in enumerate(ops):
        if i not in inner:
            renumber[i] = len(kept)
            kept.append((desc, reads))
    return [(tuple(d), [renumber.get(r, r) for r in reads]) for d, reads in kept]


def check_shapes(args, reference_dir):
    failures = 0
    generator = torch.Generator().manual_seed(SEED)
    for name in args.model:
        size = INPUT_SIZE[name]
        model = build(name, generator)
        x = torch.rand((1, 3, size, size), generator=generator)
        with torch.no_grad():
            out = model(x)
        print(f"{name}: input 3x{size}x{size}, output shape {list(out.shape)} at batch 1 "
              f"(ours: [1, {out.shape[1]}, 1, 1]; torchvision flattens)")
        theirs, ours = torch_ops(model, size), ios_ops(reference_dir / f"{name}.json")
        differences = [(i, t, o) for i, (t, o) in enumerate(zip(theirs, ours)) if t != o]
        if len(theirs) != len(ours):
            differences.append((min(len(theirs), len(ours)), f"{len(theirs)} operators",
                                f"{len(ours)} operators"))
        kinds = {}
        for desc, _ in ours:
            kinds[desc[0]] = kinds.get(desc[0], 0) + 1
        summary = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
        if differences:
            failures += 1
            print(f"  DIFFERS from {reference_dir / (name + '.json')} "
                  f"({len(differences)} operators):")
            for i, t, o in differences[:10]:
                print(f"    #{i}: torch {t}\n    #{i}: ours  {o}")
        else:
            print(f"  same {len(ours)} operators as ours ({summary}): kinds, parameters, "
                  f"output shapes and inputs")
        if name == "inception_v3":
            generator_bn = torch.Generator().manual_seed(SEED)
            unfolded = inception_v3(generator_bn, fold=False)
            with torch.no_grad():
                reference = unfolded(x)
                folded = inception_v3(torch.Generator().manual_seed(SEED))(x)
            error = ((folded - reference).abs().max() / reference.abs().max()).item()
            print(f"  BatchNorm folded: max |folded - unfolded| / max |unfolded| = {error:.2e}")
            if error > 1e-4:
                failures += 1
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    csv = lambda kind: lambda text: [kind(v) for v in text.split(",") if v]
    parser.add_argument("--model", type=csv(str), default=["inception_v3", "squeezenet"],
                        help="comma-separated: inception_v3, squeezenet (default both; our "
                        "zoo's networks), or torchvision:NAME (the model and weights "
                        "scripts/export-torchvision.py NAME exports)")
    parser.add_argument("--batch", type=csv(int), default=[1], help="comma-separated (default 1)")
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="torch.set_num_threads (default: every core)")
    parser.add_argument("--runs", type=int, default=10, help="timed runs (default 10, at least 5)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed runs first (default 3)")
    parser.add_argument("--mode", type=csv(str), default=["eager", "jit_frozen"],
                        help="comma-separated: eager, jit_frozen, cuda_graph (cuda only), "
                        "compile (torch.compile mode reduce-overhead, PyTorch 2; "
                        "default eager,jit_frozen)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                        help="cpu (default) or cuda (GPU 0, strict FP32: TF32 off)")
    parser.add_argument("--check-shapes", action="store_true",
                        help="compare each model with our zoo's IOS export, print output shapes")
    parser.add_argument("--reference", type=Path,
                        default=Path(__file__).resolve().parent.parent.parent
                        / "shared/fixtures/ios-reference/models",
                        help="directory of the IOS reference exports (NAME.json)")
    args = parser.parse_args()
    for name in args.model:
        if name not in INPUT_SIZE and torchvision_name(name) is None:
            parser.error(f"unknown model '{name}' (known: inception_v3, squeezenet, "
                         "torchvision:NAME)")
        if torchvision_name(name) is not None and args.check_shapes:
            parser.error("--check-shapes compares our zoo's models only")
    for mode in args.mode:
        if mode not in ("eager", "jit_frozen", "cuda_graph", "compile"):
            parser.error(f"unknown mode '{mode}' (known: eager, jit_frozen, cuda_graph, compile)")
        if mode == "cuda_graph" and args.device != "cuda":
            parser.error("--mode cuda_graph needs --device cuda")
        if mode == "compile" and not hasattr(torch, "compile"):
            parser.error(f"--mode compile needs PyTorch 2 (torch.compile); this is {torch.__version__}")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: this torch sees no GPU (Debian's python3-torch is "
                     "CPU-only; install a CUDA build of PyTorch on the GPU host)")
    if args.runs < 5 or args.warmup < 0 or args.threads < 1 or min(args.batch) < 1:
        parser.error("--runs must be at least 5, --warmup at least 0, --threads and --batch "
                     "at least 1")
    if args.check_shapes:
        sys.exit(1 if check_shapes(args, args.reference) else 0)
    benchmark(args)


if __name__ == "__main__":
    main()
