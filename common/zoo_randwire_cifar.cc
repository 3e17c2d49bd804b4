// RandWire for CIFAR (32x32), one of the Serenity paper's benchmark kinds:
// the stage graphs are drawn from a seed (common/watts_strogatz.h) instead
// of embedded, so a benchmark can run several.
#include <string>

#include "common/error.h"
#include "common/zoo_randwire.h"

namespace ios::zoo {

Graph BuildRandWireCifar(const RandWireCifarOptions& options) {
  if (options.channels <= 0) {
    throw Error("RandWire CIFAR: channels must be positive, got " +
                std::to_string(options.channels));
  }
  const int c = options.channels;
  GraphBuilder b("randwire_cifar" + std::to_string(options.classes), Shape{3, 32, 32});

  b.BeginBlock();
  NodeId x = b.AddConv("conv1", b.Of(GraphBuilder::kInput), c, Square(3), Square(1), Square(1),
                       Activation::kRelu);
  x = b.AddConv("conv2", b.Of(x), c, Square(3), Square(1), Square(1), Activation::kNone);
  b.EndBlock();

  int stage_channels = 2 * c;
  for (int stage = 0; stage < 2; ++stage) {
    const WsGraph ws = WattsStrogatz(options.nodes, options.k, options.p, 2 * options.seed + stage);
    const OwnedStageWiring wiring = OrientLowToHigh(ws);
    x = RandWireStage(b, "conv" + std::to_string(3 + stage), x, stage_channels, wiring.view());
    stage_channels *= 2;
  }

  b.BeginBlock();
  x = b.AddConv("conv5", b.Of(x), 1280, Square(1), Square(1), Square(0), Activation::kNone);
  b.AddGlobalAvgPool("avgpool", x);
  b.EndBlock();
  return b.Finish();
}

}  // namespace ios::zoo
