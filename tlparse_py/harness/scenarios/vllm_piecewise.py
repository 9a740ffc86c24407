"""Scenario `vllm_piecewise`: vLLM's piecewise compile, imitated on CPU without vLLM.

vLLM needs a GPU and model weights, so this program does what its compile backend does
(vllm/compilation/backends.py and piecewise_backend.py) on a tiny Llama-shaped decoder
layer (qkv linear, a sin+cos rotary stand-in, attention, o_proj, a silu-gated MLP), and
logs into TORCH_TRACE the structured records vLLM logs, with the envelopes and JSON fields
upstream tlparse's src/vllm parsers read (as in its tests/inputs/vllm_sample.log):

1. `artifact vllm_compile_event` {"type": "fresh_compile"}, before the compiled model is
   first called, outside any compile (no compile id), as vLLM's @support_torch_compile
   wrapper does; tlparse attaches it to the next compile call.
2. Dynamo traces the model with the token dimension dynamic (s77) and calls the backend,
   whose records all carry compile id [0/0]:
   - `artifact vllm_compilation_config` (JSON; lists are ", "-joined strings and mode is
     "3", CompilationMode.VLLM_COMPILE, as vLLM writes them);
   - `graph_dump vllm_patterns.SinCosFusionPass` and `vllm_patterns.SiluMulFusionPass`
     (the pattern-matcher passes' patterns, written when the pass manager is configured);
   - `graph_dump vllm_piecewise_split_graph`: the graph split at the splitting op
     `harness_vllm::attention` into submod_0, submod_1 (the attention call alone, run
     eagerly) and submod_2;
   - for each compiled piece (submod_0, then submod_2), vLLM's up-front compile of all
     its ranges, compile sizes first: `artifact vllm_piecewise_compile_start` for size 4,
     size 2, then the general range [1, 64], each followed by Inductor's records for that
     compile (among them `before_post_grad_graph` and the pass manager's dumps
     `graph_dump vllm_post_grad.0.SinCosFusionPass`, `vllm_post_grad.1.SiluMulFusionPass`);
     `graph_dump vllm_submod_<i>` (the piece's Dynamo-level graph) follows the piece's
     first compile start only, as vLLM logs it once per piece.
3. The compiled model then runs at 8 tokens (the range's code) and at 4 and 2 (the
   sizes' code), checked against eager.

`is_cudagraph_capture_size` is computed as vLLM computes it (the range's start is one of
compile_sizes): true for the sizes, false for the range. The config says cudagraph_mode
PIECEWISE as a GPU run would; on CPU nothing is captured, the log is the one vLLM writes
under that mode. The sizes are 4 and 2 (not 1) so that the range's start is not a size.

Inductor's FX graph and AOTAutograd caches are off: their cache-key records would make
most of the log (every compile here is a fresh one anyway).
"""

import hashlib
import json

import torch
from torch import nn
from torch._dispatch.python import enable_python_dispatcher
from torch._inductor import pattern_matcher as pm
from torch._inductor.compile_fx import compile_fx
from torch._inductor.custom_graph_pass import CustomGraphPass
from torch._logging import trace_structured
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.fx.passes.split_module import split_module

HIDDEN = 16
LAYERS = 1
MAX_TOKENS = 64  # max_num_batched_tokens: the general range is [1, MAX_TOKENS]
COMPILE_SIZES = (4, 2)  # as vLLM lists them: largest first
SPLITTING_OPS = ("harness_vllm::attention",)


# -- custom ops ---------------------------------------------------------------------------


@torch.library.custom_op("harness_vllm::attention", mutates_args=("out",))
def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor) -> None:
    """Attention that writes into `out`, like vLLM's unified_attention_with_output."""
    scores = torch.softmax(q @ k.transpose(0, 1) / HIDDEN**0.5, dim=-1)
    out.copy_(scores @ v)


@attention.register_fake
def _(q, k, v, out) -> None:
    return None


@torch.library.custom_op("harness_vllm::fused_sincos", mutates_args=())
def fused_sincos(x: torch.Tensor) -> torch.Tensor:
    """sin(x) + cos(x) in one op: what SinCosFusionPass puts in the graph."""
    return torch.sin(x) + torch.cos(x)


@fused_sincos.register_fake
def _(x):
    return torch.empty_like(x)


@torch.library.custom_op("harness_vllm::silu_and_mul", mutates_args=())
def silu_and_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """silu(a) * b in one op: what SiluMulFusionPass puts in the graph."""
    return torch.nn.functional.silu(a) * b


@silu_and_mul.register_fake
def _(a, b):
    return torch.empty_like(a)


# -- the model ----------------------------------------------------------------------------


class DecoderLayer(nn.Module):
    """qkv projection, a rotary stand-in, attention, o_proj and a gated MLP."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv_proj = nn.Linear(HIDDEN, 3 * HIDDEN, bias=False)
        self.o_proj = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.gate_up_proj = nn.Linear(HIDDEN, 4 * HIDDEN, bias=False)
        self.down_proj = nn.Linear(2 * HIDDEN, HIDDEN, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv_proj(x).split(HIDDEN, dim=-1)
        q = torch.sin(q) + torch.cos(q)
        out = torch.empty_like(q)
        torch.ops.harness_vllm.attention(q, k, v, out)
        x = x + self.o_proj(out)
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return x + self.down_proj(torch.nn.functional.silu(gate) * up)


class TinyModel(nn.Module):
    """LAYERS decoder layers over a [num_tokens, HIDDEN] input (one keeps the log small)."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer() for _ in range(LAYERS))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


# -- post-grad passes ---------------------------------------------------------------------


def _sincos_search(x):
    return torch.sin(x) + torch.cos(x)


def _sincos_replace(x):
    return torch.ops.harness_vllm.fused_sincos(x)


def _silu_mul_search(a, b):
    return torch.nn.functional.silu(a) * b


def _silu_mul_replace(a, b):
    return torch.ops.harness_vllm.silu_and_mul(a, b)


class PatternPass:
    """One pattern-matcher pass, like vLLM's VllmPatternMatcherPass."""

    def __init__(self, name: str, search, replace, n_inputs: int) -> None:
        self.name = name
        self.patterns = pm.PatternMatcherPass(pass_name=name)
        example = [torch.empty(4, HIDDEN) for _ in range(n_inputs)]
        pm.register_replacement(search, replace, example, pm.fwd_only, self.patterns)

    def dump_patterns(self) -> None:
        """`graph_dump vllm_patterns.<name>`: the registered patterns as Python."""

        def source() -> str:
            lines = [f"# Patterns for {self.name}"]
            for entries in self.patterns.patterns.values():
                for entry in entries:
                    lines.append(pm.PatternPrettyPrinter.run(entry.pattern, output_name=f"pattern_{len(lines) - 1}"))
            return "\n".join(lines) + "\n"

        trace_structured("graph_dump", metadata_fn=lambda: {"name": f"vllm_patterns.{self.name}"}, payload_fn=source)

    def __call__(self, graph: torch.fx.Graph) -> int:
        return self.patterns.apply(graph)


class PostGradPassManager(CustomGraphPass):
    """Inductor's post_grad_custom_post_pass: runs the passes, dumps the graph after each."""

    def __init__(self) -> None:
        self.passes: list[PatternPass] = []

    def configure(self) -> None:
        self.passes = [
            PatternPass("SinCosFusionPass", _sincos_search, _sincos_replace, 1),
            PatternPass("SiluMulFusionPass", _silu_mul_search, _silu_mul_replace, 2),
        ]
        for p in self.passes:
            p.dump_patterns()

    def __call__(self, graph: torch.fx.Graph) -> None:
        for i, p in enumerate(self.passes):
            p(graph)
            graph.eliminate_dead_code()
            gm = graph.owning_module
            trace_structured(
                "graph_dump",
                metadata_fn=lambda i=i, p=p: {"name": f"vllm_post_grad.{i}.{p.name}"},  # type: ignore[misc, unused-ignore]
                payload_fn=lambda: gm.print_readable(print_output=False, include_stride=True, include_device=True),  # type: ignore[union-attr, unused-ignore]  # torch's stubs; Any without torch
            )

    def uuid(self) -> str:
        return hashlib.sha256(",".join(p.name for p in self.passes).encode()).hexdigest()


# -- the backend --------------------------------------------------------------------------


def op_name(node: torch.fx.Node) -> str | None:
    """`namespace::op` of a call_function node on an operator, else None."""
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        return target._schema.name
    if isinstance(target, torch._ops.OpOverloadPacket):
        return target._qualified_op_name
    return None


def split_graph(gm: torch.fx.GraphModule) -> tuple[torch.fx.GraphModule, list[tuple[str, bool]]]:
    """Split at the splitting ops, each of which gets a submodule of its own."""
    subgraph_of: dict[torch.fx.Node, int] = {}
    splitting: set[int] = set()
    current = 0
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        if node.op == "call_function" and op_name(node) in SPLITTING_OPS:
            current += 1
            subgraph_of[node] = current
            splitting.add(current)
            current += 1
        else:
            subgraph_of[node] = current
    split_gm = split_module(gm, None, lambda node: subgraph_of[node], keep_original_order=True)  # type: ignore[arg-type, unused-ignore]  # torch's stubs; Any without torch
    pieces = [(name, int(name.split("_")[1]) in splitting) for name, _ in split_gm.named_children()]
    return split_gm, pieces


def concrete_args(fake_args, size: int) -> list:
    """Real inputs for a compile at one size: every symbol in a shape or stride is `size`."""

    def concrete(value) -> int:
        if isinstance(value, torch.SymInt):
            expr = value.node.expr
            return int(expr.subs({sym: size for sym in expr.free_symbols}))
        return int(value)

    args = []
    for arg in fake_args:
        if isinstance(arg, torch.Tensor):
            shape = [concrete(d) for d in arg.shape]
            stride = [concrete(d) for d in arg.stride()]
            storage = 1 + sum((d - 1) * st for d, st in zip(shape, stride))
            args.append(torch.zeros(storage, dtype=arg.dtype).as_strided(shape, stride))
        else:
            args.append(concrete(arg))  # type: ignore[arg-type, unused-ignore]  # torch's stubs; Any without torch
    return args


class PiecewiseBackend:
    """One compiled piece: every compile size and the general range, compiled up front."""

    def __init__(self, graph, index: int, total: int, submod_name: str, fake_args) -> None:
        self.graph = graph
        self.index = index
        self.total = total
        self.submod_name = submod_name
        self.graph_logged = False
        # Where the token count is: a SymInt argument, else the first dim of the first tensor.
        self.sym_index = next((i for i, a in enumerate(fake_args) if isinstance(a, torch.SymInt)), None)
        # Inductor returns a piece's outputs as a list; a piece that returns one value
        # must hand back that value (vLLM's returns_tuple).
        output = next(iter(graph.graph.find_nodes(op="output")))
        self.returns_tuple = isinstance(output.args[0], (tuple, list))
        # vLLM's range_entries: the compile sizes first, then the range, all compiled now.
        self.by_size: dict[int, object] = {}
        for size in COMPILE_SIZES:
            self.log_compile_start(size, size)
            # A static compile of its own: out of Dynamo's fake mode and tracing context
            # (still inside its compile, so its records keep the compile id).
            with unset_fake_temporarily(), torch._guards.tracing(None):
                self.by_size[size] = compile_fx(self.graph, concrete_args(fake_args, size))
        self.log_compile_start(1, MAX_TOKENS)
        self.general = compile_fx(self.graph, list(fake_args))

    def log_compile_start(self, start: int, end: int) -> None:
        """vLLM's `vllm_piecewise_compile_start`, and the piece's graph the first time."""
        info = {
            "piecewise_index": self.index,
            "submod_name": self.submod_name,
            "total_piecewise_compiles": self.total,
            "compile_range_start": start,
            "compile_range_end": end,
            "is_single_size": start == end,
            "is_cudagraph_capture_size": start in COMPILE_SIZES,
        }
        trace_structured(
            "artifact",
            metadata_fn=lambda: {"name": "vllm_piecewise_compile_start", "encoding": "json"},
            payload_fn=lambda: json.dumps(info),
        )
        if not self.graph_logged:
            self.graph_logged = True
            trace_structured(
                "graph_dump",
                metadata_fn=lambda: {"name": f"vllm_{self.submod_name}"},
                payload_fn=lambda: self.graph.print_readable(print_output=False),
            )

    def __call__(self, *args):
        if self.sym_index is None:
            size = next(a for a in args if isinstance(a, torch.Tensor)).shape[0]
        else:
            size = args[self.sym_index]
        runnable = self.by_size.get(size, self.general)
        outputs = runnable(*args)  # type: ignore[operator, unused-ignore]  # torch's stubs; Any without torch
        return outputs if self.returns_tuple or not isinstance(outputs, (tuple, list)) else outputs[0]


class PiecewiseCompileInterpreter(torch.fx.Interpreter):
    """Runs the split graph on fake inputs, compiling each non-splitting piece on the way."""

    def __init__(self, split_gm, to_compile: list[str], fake_mode) -> None:
        super().__init__(split_gm)
        self.to_compile = to_compile
        self.fake_mode = fake_mode

    def run(self, *args):  # type: ignore[override, unused-ignore]  # torch's stubs; Any without torch
        args = [self.fake_mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]  # type: ignore[assignment, unused-ignore]  # torch's stubs; Any without torch
        with self.fake_mode, enable_python_dispatcher():
            return super().run(*args)

    def call_module(self, target, args, kwargs):
        output = super().call_module(target, args, kwargs)
        if target in self.to_compile:
            submod = self.fetch_attr(target)
            index = self.to_compile.index(target)
            self.module.__dict__[target] = PiecewiseBackend(submod, index, len(self.to_compile), target, args)
        return output


def log_compilation_config() -> None:
    """vLLM's `vllm_compilation_config` record (VllmBackend._log_compilation_config)."""
    config = {
        "model": "harness/tiny-llama-2l",
        "prefix": "",
        "mode": "3",
        "backend": "inductor",
        "custom_ops": "none",
        "splitting_ops": ", ".join(SPLITTING_OPS),
        "cudagraph_mode": "PIECEWISE",
        "compile_sizes": ", ".join(str(s) for s in COMPILE_SIZES),
        "compile_ranges_endpoints": str(MAX_TOKENS),
        "use_inductor_graph_partition": False,
        "inductor_passes": "",
        "enabled_passes": "eliminate_noops, fuse_sincos, fuse_silu_mul",
        "dynamic_shapes_type": "DynamicShapesType.BACKED",
        "dynamic_shapes_evaluate_guards": False,
    }
    trace_structured(
        "artifact",
        metadata_fn=lambda: {"name": "vllm_compilation_config", "encoding": "json"},
        payload_fn=lambda: json.dumps(config),
    )


PASS_MANAGER = PostGradPassManager()


def vllm_backend(gm: torch.fx.GraphModule, example_inputs):
    """The torch.compile backend: log the config, split, compile the pieces."""
    log_compilation_config()
    PASS_MANAGER.configure()
    torch._inductor.config.post_grad_custom_post_pass = PASS_MANAGER
    split_gm, pieces = split_graph(gm)
    trace_structured(
        "graph_dump",
        metadata_fn=lambda: {"name": "vllm_piecewise_split_graph"},
        payload_fn=lambda: split_gm.print_readable(print_output=False),
    )
    to_compile = [name for name, is_splitting in pieces if not is_splitting]
    fake_values = [node.meta["example_value"] for node in gm.graph.find_nodes(op="placeholder")]
    fake_args = [fake_values[i] if isinstance(t, torch.Tensor) else t for i, t in enumerate(example_inputs)]
    fake_mode = torch._guards.detect_fake_mode()
    PiecewiseCompileInterpreter(split_gm, to_compile, fake_mode).run(*fake_args)
    return split_gm


def main() -> None:
    # No FX graph / AOTAutograd cache records (tens of KB per compile); see the docstring.
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    torch.manual_seed(0)
    model = TinyModel().eval()
    compiled = torch.compile(model, backend=vllm_backend, fullgraph=True, dynamic=False)
    trace_structured(
        "artifact",
        metadata_fn=lambda: {"name": "vllm_compile_event", "encoding": "json"},
        payload_fn=lambda: json.dumps({"type": "fresh_compile"}),
    )
    with torch.no_grad():
        first = torch.randn(8, HIDDEN)
        torch._dynamo.mark_dynamic(first, 0)
        torch.testing.assert_close(compiled(first), model(first), atol=1e-4, rtol=1e-4)
        # vLLM's warm-up at each compile size (cudagraph capture on a GPU): the sizes' code.
        for size in COMPILE_SIZES:
            x = torch.randn(size, HIDDEN)
            torch.testing.assert_close(compiled(x), model(x), atol=1e-4, rtol=1e-4)
    print("vllm_piecewise ok")


if __name__ == "__main__":
    main()
