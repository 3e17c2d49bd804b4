# The farm's wire format: one Envelope per ZeroMQ frame, coordinator <-> worker.
# C++ code never sees these types: schema/protocol.h mirrors them as plain
# values and schema/protocol.cc converts and validates.
#
# Compatibility rules (see schema/README.md):
# - Envelope.version (field 0) is read before anything else; bump
#   ios::schema::kProtocolVersion on any change an old peer would misread.
# - Fields and enumerants are append only: never renumber, reuse or remove an
#   ordinal. Enum ordinals equal those of the C++ enums they mirror.
# - Integers the C++ side holds as `int` are Int32, so that a negative value
#   arrives as negative and is refused, instead of wrapping into a huge one.

@0x95c3b302bb0eab7a;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("ios::schema::wire");

struct Envelope {
  version @0 :UInt32;  # first, so a peer of another version is refused unread
  union {
    hello @1 :Hello;
    heartbeat @2 :Heartbeat;
    query @3 :StageQuery;
    result @4 :StageResult;
    reject @5 :Reject;
    shutdown @6 :Shutdown;
  }
}

# Worker -> coordinator, first message on every connection.
struct Hello {
  workerId @0 :Text;
  backend @1 :Text;        # DeviceInfo.backend
  deviceName @2 :Text;     # DeviceInfo.name
  fingerprint @3 :Text;    # DeviceInfo.fingerprint: routing key
  simulated @4 :Bool;      # DeviceInfo.simulated
  properties @5 :List(Property);
  capacity @6 :UInt32;
  heartbeatMs @7 :UInt32;
  software @8 :Text;
  # Protocol 7: identical devices of this class the worker owns (>= 1), and
  # the links between them as it knows them now.
  devices @9 :UInt32;
  links @10 :List(LinkFigures);
}

# Protocol 7: one link between a worker's devices (ios::LinkFigures).
struct LinkFigures {
  kind @0 :Text;         # nvlink, pcie, host, given
  gbPerS @1 :Float64;    # bandwidth, 1e9 bytes per second
  latencyUs @2 :Float64;
  measured @3 :Bool;     # false: a model's or a preset's figures
}

# A list of pairs rather than a map: keeps the sender's order.
struct Property {
  key @0 :Text;
  value @1 :Text;
}

struct Heartbeat {
  intervalMs @0 :UInt32;
}

# Coordinator -> worker: measure one stage. Self-contained on purpose.
struct StageQuery {
  queryId @0 :UInt64;
  batchSize @1 :Int32;
  dtype @2 :Text;
  warmup @3 :Int32;
  number @4 :Int32;
  repeat @5 :Int32;
  stage @6 :Stage;
  maxRepeat @7 :Int32;  # adaptive protocol (v2): <= repeat means not adaptive
  maxRelativeSpreadPercent @8 :Float64;
  # How long the coordinator waits for the answer (--query-timeout-s); the
  # worker takes a measurement that outlives most of it as hung. 0: not said
  # (an older coordinator). Added within protocol 5: an older worker ignores
  # it, which is no misreading.
  timeoutMs @9 :UInt32;
  # Protocol 6: how the stage is put on the device when timed (a worker of
  # protocol 5 would ignore it and measure isolated, so 5 is refused).
  protocol @10 :StageProtocol;
  warmWeights @11 :Bool;  # executed: weights as warm as a whole run leaves them
  # Protocol 6: when set, the query times this whole network under its
  # schedule end to end instead of `stage` (left empty), the search's
  # verification of its best candidates (common/network_spec.h).
  network @12 :NetworkRun;
  # Protocol 7: when set, the query times copies between two of the
  # worker's devices instead of `stage` (left empty): only a worker that
  # announced two or more devices gets one.
  link @13 :LinkQuery;
}

# Protocol 7 (ios::LinkQuery).
struct LinkQuery {
  bytes @0 :List(Int64);  # copy sizes
  repeats @1 :Int32;      # timed copies per size
}

# Append only (ios::StageProtocol).
enum StageProtocol {
  isolated @0;
  executed @1;
}

# A whole network under a schedule (ios::NetworkSpec).
struct NetworkRun {
  # The graph in IOS JSON (common/ios_json.h), compact: the one text every
  # loader of ours reads, so every kind a model may hold travels unchanged.
  graphJson @0 :Text;
  stages @1 :List(NetworkStage);
  weightSeed @2 :UInt64;
}

struct NetworkStage {
  strategy @0 :Strategy;
  groups @1 :List(List(Int32));  # node ids, each group in execution order
}

# --- Stages (common/stage.h) ---

# Append only (ios::Strategy).
enum Strategy {
  parallel @0;
  merge @1;
}

struct Shape {
  c @0 :Int32;
  h @1 :Int32;
  w @2 :Int32;
}

# An external tensor (index into Stage.externals) or the output of an earlier
# op of the same group (index into Group.ops).
struct SliceRef {
  external @0 :Bool;
  index @1 :Int32;
  begin @2 :Int32;
  end @3 :Int32;
}

# Slices summed element-wise; the terms of an input are concatenated.
struct Term {
  slices @0 :List(SliceRef);
}

struct StageOp {
  op @0 :Op;
  inputs @1 :List(Term);
  output @2 :Shape;  # declared so the receiver can check it against the inputs
}

struct Group {
  ops @0 :List(StageOp);
}

struct Stage {
  strategy @0 :Strategy;
  externals @1 :List(Shape);
  groups @2 :List(Group);
}

# --- Operators (common/graph.h) ---

# Append only (ios::OpKind).
enum OpKind {
  input @0;
  conv @1;
  pool @2;
  activation @3;
  eltwise @4;
  identity @5;
  sequential @6;
  registered @7;  # protocol 5: a kind of common/op_kinds.h, named in Op.registered
}

# Append only (ios::Activation).
enum Activation {
  none @0;
  relu @1;
  sigmoid @2;
  tanh @3;
  relu6 @4;      # protocol 3
  hardswish @5;  # protocol 3
  silu @6;       # protocol 3
  hardsigmoid @7;  # protocol 4
  leakyRelu @8;    # protocol 4
  gelu @9;         # protocol 8
  geluTanh @10;    # protocol 8
}

# Append only (ios::PoolType).
enum PoolType {
  max @0;
  avg @1;
  globalMax @2;
  globalAvg @3;
}

# Append only (ios::EltwiseType).
enum EltwiseType {
  add @0;
  mul @1;
}

struct Conv {
  outChannels @0 :Int32;
  kernelH @1 :Int32;
  kernelW @2 :Int32;
  strideH @3 :Int32;
  strideW @4 :Int32;
  padH @5 :Int32;
  padW @6 :Int32;
  dilationH @7 :Int32;
  dilationW @8 :Int32;
  groups @9 :Int32;
  bias @10 :Bool;
  activation @11 :Activation;
  padEndH @12 :Int32;  # protocol 9: rows padded at the bottom beyond padH
  padEndW @13 :Int32;  # protocol 9: columns padded at the right beyond padW
}

struct Pool {
  type @0 :PoolType;
  kernelH @1 :Int32;
  kernelW @2 :Int32;
  strideH @3 :Int32;
  strideW @4 :Int32;
  padH @5 :Int32;
  padW @6 :Int32;
  ceil @7 :Bool;  # protocol 3: the output size rounds up (max pooling)
  excludePadding @8 :Bool;  # protocol 5: the divisor leaves padding out (average pooling)
}

# All parameter sets are sent whatever the kind, not a union: ios::OpParams
# keeps them all, and sending them keeps a round trip exact. Only the kind's
# own fields are checked and used.
struct Op {
  kind @0 :OpKind;
  conv @1 :Conv;
  pool @2 :Pool;
  activation @3 :Activation;
  eltwise @4 :EltwiseType;
  chain @5 :List(Op);  # sequential only; the receiver bounds its depth
  registered @6 :RegisteredOp;  # protocol 5; kind registered only
}

# A kind declared in common/op_kinds.h: its name and its attributes in
# declared order. New kinds need no schema change.
struct RegisteredOp {
  name @0 :Text;
  attributes @1 :List(Int32);
}

# --- Results ---

# Append only (ios::MeasureError without kNone, which is the `ok` branch).
enum ErrorKind {
  outOfMemory @0;
  unsupported @1;
  backendFailure @2;
  timeout @3;
}

# Worker -> coordinator: the answer to one query; a failure is an answer.
struct StageResult {
  queryId @0 :UInt64;
  union {
    ok :group {
      medianMs @1 :Float64;
      spreadMs @2 :Float64;
      samples @3 :Int32;
      # What the backend chose to run the stage (cuda: convolution
      # algorithms); empty from older workers.
      detail @6 :Text;
      # Protocol 7: the answer to a link query (ios::LinkMeasurement).
      link @7 :LinkResult;
    }
    error :group {
      kind @4 :ErrorKind;
      message @5 :Text;
    }
  }
}

struct LinkResult {
  kind @0 :Text;
  simulated @1 :Bool;
  latencyUs @2 :Float64;  # fitted
  gbPerS @3 :Float64;
  samples @4 :List(LinkSample);
}

struct LinkSample {
  bytes @0 :Int64;
  medianMs @1 :Float64;
  spreadMs @2 :Float64;
}

# Append only (ios::schema::RejectReason).
enum RejectReason {
  versionMismatch @0;
  malformed @1;
  unknownWorker @2;
}

struct Reject {
  reason @0 :RejectReason;
  message @1 :Text;
}

struct Shutdown {
  reason @0 :Text;
}
