#!/usr/bin/python3
"""Exports a torchvision classification CNN to ONNX together with a reference
input and PyTorch's output for it, so that

    ios-run --model MODEL.onnx --input MODEL.in.bin --expect MODEL.out.bin

can check ios-farm's ONNX importer and kernels against PyTorch.

The weights are random (weights=None, then He's fan-in scaling: see
he_init) but seeded, so the files are reproducible without network access
or a weights cache. The .bin files are
raw little-endian float32 in NCHW order (the output in PyTorch's layout,
(B, classes) for these models) with no header: ios-run knows the shapes from
the model.

--structure-only leaves the weights out of the file (they become graph inputs
without initializers), which keeps it small enough to commit as a test
fixture for the importer's graph handling; no .bin files are written then,
since a model without weights has no meaningful output.

Needs torch, torchvision and onnx; on the dev machines those are only in
Debian's python, hence the /usr/bin/python3 shebang.

Usage: scripts/export-torchvision.py MODEL [--out DIR] [--batch B] [--seed S]
                                           [--opset N] [--init he|torchvision]
                                           [--structure-only]
                                           [--head softmax|logsoftmax]
"""
import argparse
import copy
import difflib
import os
import sys

import onnx
import torch
import torchvision.models

# Models whose auxiliary classifiers would otherwise add outputs (and whose
# weights=None default warns about changing init); init_weights=True keeps the
# random weights independent of a future change of that default.
AUX_KWARGS = {
    "inception_v3": {"aux_logits": False, "init_weights": True},
    "googlenet": {"aux_logits": False, "init_weights": True},
}

# Inception v3's stride/padding arithmetic is designed for 299x299; everything
# else is an ImageNet 224x224 model.
INPUT_SIZE = {"inception_v3": 299, "convnext_mini": 64, "vit_mini": 64, "swin_mini": 32, "maxvit_mini": 64}
DEFAULT_INPUT_SIZE = 224
# The weights' seed unless --seed says otherwise (bench/pytorch_peer.py builds
# the same model from it).
DEFAULT_SEED = 0


# Models of our own from torchvision's classes, small enough to carry to a
# GPU host (a device call takes 64 MiB) and quick in tests, with every kind
# their full-size relatives use. convnext_mini: ConvNeXt's blocks (depthwise
# 7x7, LayerNorm over channels, GELU, layer scale) at widths 32 and 64, two
# blocks a stage, 100 classes, a 64x64 input.
MINI_MODELS = {
    "convnext_mini": lambda: torchvision.models.convnext.ConvNeXt(
        [torchvision.models.convnext.CNBlockConfig(32, 64, 2),
         torchvision.models.convnext.CNBlockConfig(64, None, 2)],
        num_classes=100),
    # vit_mini: a Vision Transformer (torchvision's class: patch convolution,
    # class token, position embedding, pre-norm encoder blocks of multi-head
    # attention and a GELU MLP) with 2 layers, 4 heads of 16 features, 16x16
    # patches of a 64x64 input: 17 tokens.
    "vit_mini": lambda: torchvision.models.vision_transformer.VisionTransformer(
        image_size=64, patch_size=16, num_layers=2, num_heads=4, hidden_dim=64,
        mlp_dim=128, num_classes=100),
    # swin_mini: a Swin Transformer (torchvision's class: shifted windows,
    # relative position bias, patch merging) with stages of 2 blocks at
    # widths 32 and 64 (2 and 4 heads), 4x4 windows on a 32x32 input: an
    # 8x8 map of 2x2 windows, then one 4x4 window.
    "swin_mini": lambda: torchvision.models.swin_transformer.SwinTransformer(
        patch_size=[4, 4], embed_dim=32, depths=[2, 2], num_heads=[2, 4],
        window_size=[4, 4], num_classes=100),
    # maxvit_mini: a MaxViT (torchvision's class: MBConv, block and grid
    # attention with relative position bias) with two stages of one layer at
    # widths 32 and 64, heads of 16, partitions of 4 on a 64x64 input: 16x16
    # then 8x8 maps.
    "maxvit_mini": lambda: torchvision.models.maxvit.MaxVit(
        input_size=(64, 64), stem_channels=16, partition_size=4, block_channels=[32, 64],
        block_layers=[1, 1], head_dim=16, stochastic_depth_prob=0.0, num_classes=100),
}


def classification_models():
    # module= restricts the list to the classification namespace, excluding
    # detection/segmentation/video models that take other inputs.
    return sorted(torchvision.models.list_models(module=torchvision.models))


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="Export a torchvision classification model (random, "
        "seeded weights) to ONNX with a reference input and output for "
        "`ios-run --model MODEL.onnx --input MODEL.in.bin "
        "--expect MODEL.out.bin`.")
    parser.add_argument(
        "model", metavar="MODEL",
        help="torchvision.models constructor name, e.g. inception_v3, "
        "googlenet, squeezenet1_1, resnet50, densenet121, mobilenet_v2, "
        "efficientnet_b0")
    parser.add_argument("--out", default=".", metavar="DIR",
                        help="directory to write into (created if missing; "
                        "default: .)")
    parser.add_argument("--batch", type=int, default=1, metavar="B",
                        help="batch size of the input (default: 1)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, metavar="S",
                        help="seed for the weights and the input (default: 0)")
    parser.add_argument("--opset", type=int, default=13, metavar="N",
                        help="ONNX opset version (default: 13)")
    parser.add_argument("--init", choices=["he", "torchvision"], default="he",
                        help="he (default): He fan-in weights and random batch "
                        "norm statistics, so outputs stay of order one; "
                        "torchvision: the constructor's own initialisation")
    parser.add_argument("--structure-only", action="store_true",
                        help="omit the weights (export_params=False; they "
                        "become graph inputs) and write only MODEL.onnx")
    parser.add_argument("--head", choices=["softmax", "logsoftmax"],
                        help="append a softmax (or its logarithm) over the "
                        "classes, as a deployed classifier has; the files are "
                        "then named MODEL-HEAD.*")
    args = parser.parse_args(argv)
    if args.batch < 1:
        parser.error("--batch must be at least 1")
    return args


def he_init(model):
    """Redraws every convolution and linear layer's weights with He's
    fan-in scaling and small random biases, and gives batch norms random
    statistics and affine parameters near their trained ranges. The
    constructors' own initialisations (meant for training, with batch norm
    at its initial statistics) make deep models' outputs vanish or explode
    in eval mode (GoogLeNet's are the classifier's bias alone), so a
    comparison with them would not exercise the network. Layer norms get
    random affine parameters and ConvNeXt's layer scales values near 1
    (their constructors' 1 / 0 and 1e-6 would make the norms' scale and
    bias, and each residual branch, invisible in the output)."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
                torch.nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")
                if m.bias is not None:
                    m.bias.uniform_(-0.1, 0.1)
            elif isinstance(m, torch.nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.0)
                m.bias.uniform_(-0.1, 0.1)
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
            elif isinstance(m, torch.nn.LayerNorm) and m.elementwise_affine:
                m.weight.uniform_(0.5, 1.0)
                m.bias.uniform_(-0.1, 0.1)
            scale = getattr(m, "layer_scale", None)
            if isinstance(scale, torch.nn.Parameter):
                scale.uniform_(0.5, 1.0)


def build_model(name, seed, init):
    """Returns the model in eval mode with weights drawn from `seed`."""
    torch.manual_seed(seed)
    if name in MINI_MODELS:
        model = MINI_MODELS[name]()
        if init == "he":
            he_init(model)
        return model.eval()
    constructor = getattr(torchvision.models, name)
    extra = AUX_KWARGS.get(name, {})
    try:
        model = constructor(weights=None, **extra)
    except (TypeError, ValueError):
        # A torchvision that rejects these kwargs still builds the model
        # without downloading; reseed so the fallback is reproducible too.
        torch.manual_seed(seed)
        model = constructor(weights=None)
    if init == "he":
        he_init(model)
    return model.eval()


# A float32 reference is only an oracle when float32 can reproduce it: with
# random weights a deep network can be chaotic in float32 (efficientnet_v2_l
# under he_init: PyTorch's float32 and float64 outputs differ by 55% of the
# largest), so that no float32 implementation, PyTorch's own included,
# could match it within 1e-3. Such weights are tamed: every batch norm's
# scale times TAMING_FACTOR until float32 and float64 agree within
# CONDITIONING_TOLERANCE of the largest output.
CONDITIONING_TOLERANCE = 1e-5
TAMING_FACTOR = 0.75
TAMING_STEPS = 4


def float64_disagreement(model, x):
    """The largest |float32 - float64| output difference over the largest
    |float64| output."""
    with torch.no_grad():
        y32 = reference_output(model, x).double()
        y64 = copy.deepcopy(model).double()(x.double())
    return ((y32 - y64).abs().max() / y64.abs().max().clamp_min(1e-30)).item()


def tame(model, x):
    """Scales batch norms down until float32 reproduces float64 (above);
    says so on stderr when it had to."""
    before = disagreement = float64_disagreement(model, x)
    steps = 0
    while disagreement > CONDITIONING_TOLERANCE and steps < TAMING_STEPS:
        with torch.no_grad():
            for m in model.modules():
                if isinstance(m, torch.nn.BatchNorm2d):
                    m.weight.mul_(TAMING_FACTOR)
        steps += 1
        disagreement = float64_disagreement(model, x)
    if steps > 0:
        print(f"note: PyTorch's float32 output differed from float64 by {before:.2g} of the "
              f"largest; batch norm scales x{TAMING_FACTOR ** steps:.3g}: now {disagreement:.2g}",
              file=sys.stderr)
    if disagreement > CONDITIONING_TOLERANCE:
        sys.exit(f"error: float32 and float64 outputs still differ by {disagreement:.2g} "
                 "of the largest: no float32 reference can be trusted")


def make_input(name, batch, seed):
    # A generator of its own keeps the input independent of how many random
    # numbers the model's initialisation consumed.
    size = INPUT_SIZE.get(name, DEFAULT_INPUT_SIZE)
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(batch, 3, size, size, generator=generator)


def reference_output(model, x):
    with torch.no_grad():
        y = model(x)
    if not isinstance(y, torch.Tensor):
        # Only a model with auxiliary outputs still enabled gets here; the
        # ONNX graph would have several outputs, which ios-run can't compare.
        sys.exit(f"error: model returned {type(y).__name__}, not one tensor")
    return y


def export_onnx(model, x, path, opset, with_params):
    torch.onnx.export(
        model, x, path,
        export_params=with_params,
        do_constant_folding=True,
        opset_version=opset,
        input_names=["input"],
        output_names=["output"],
        training=torch.onnx.TrainingMode.EVAL)


def write_raw(tensor, path):
    # '<f4' pins the byte order, so the file is the same on any host.
    tensor.detach().cpu().numpy().astype("<f4").tofile(path)


def check_onnx(path):
    # A checker complaint is worth seeing but the file may still be usable
    # (the checker lags behind exporters), so it does not fail the export.
    try:
        onnx.checker.check_model(path)
    except onnx.checker.ValidationError as err:
        first_line = str(err).strip().splitlines()[0] if str(err) else ""
        print(f"warning: onnx.checker rejects {path}: {first_line}",
              file=sys.stderr)


def shape_str(shape):
    return "(" + ",".join(str(d) for d in shape) + ")"


def report(path, x_shape, y_shape):
    size = os.path.getsize(path)
    print(f"wrote {path} ({size} bytes) input {shape_str(x_shape)} "
          f"output {shape_str(y_shape)}")


def main(argv):
    args = parse_args(argv)
    if args.model not in MINI_MODELS and args.model not in classification_models():
        # The full list is ~80 names; near matches catch the usual typos.
        near = difflib.get_close_matches(args.model, classification_models())
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        print(f"error: '{args.model}' is not a torchvision classification "
              f"model{hint}", file=sys.stderr)
        return 2

    model = build_model(args.model, args.seed, args.init)
    if args.head is not None:
        head = torch.nn.Softmax if args.head == "softmax" else torch.nn.LogSoftmax
        model = torch.nn.Sequential(model, head(dim=1)).eval()
    x = make_input(args.model, args.batch, args.seed)
    if args.init == "he" and not args.structure_only:
        tame(model, x)
    # The output also gives the shape to report in structure-only mode.
    y = reference_output(model, x)

    os.makedirs(args.out, exist_ok=True)
    name = args.model if args.head is None else f"{args.model}-{args.head}"
    base = os.path.join(args.out, name)
    onnx_path = base + ".onnx"
    export_onnx(model, x, onnx_path, args.opset, not args.structure_only)
    check_onnx(onnx_path)
    written = [onnx_path]

    if not args.structure_only:
        write_raw(x, base + ".in.bin")
        write_raw(y, base + ".out.bin")
        written += [base + ".in.bin", base + ".out.bin"]

    for path in written:
        report(path, x.shape, y.shape)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
