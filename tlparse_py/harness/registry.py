"""The scenarios the harness knows: names, descriptions and what each must produce.

Nothing here imports torch. Each scenario's program is a script in `scenarios/<name>.py`
that the runner executes in a subprocess; this module only describes it.
"""

from __future__ import annotations

from pathlib import Path

from msgspec import Struct

SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"


class Scenario(Struct, frozen=True):
    """One harness scenario.

    `expect` lists byte strings that must occur somewhere in the scenario's logs; they are
    the records the scenario exists to produce, so a torch release that stops emitting
    them shows up as a failed scenario instead of a silently thinner fixture.
    """

    name: str
    description: str
    needs_cuda: bool = False
    # draft_export and the export/fake-kernel records are only written under TORCH_DTRACE.
    dtrace: bool = False
    # `cache` runs its program twice, sharing one TORCHINDUCTOR_CACHE_DIR.
    processes: int = 1
    # What each process is for, shown next to its log in the fixtures README.
    process_labels: tuple[str, ...] = ()
    min_logs: int = 1
    expect: tuple[str, ...] = ()
    # The program is meant to die by SIGKILL (a log that ends mid-compile): that exit is its
    # success, and any other exit, 0 included, is a failure.
    expect_killed: bool = False
    # Its fixture logs are gzipped whatever their size: logs mostly of compilation_metrics (each
    # with torch's whole config, ~38 KB) shrink eightfold, and the fixtures have a budget.
    gzip_fixture: bool = False

    @property
    def script(self) -> Path:
        """The scenario program."""
        return SCENARIO_DIR / f"{self.name}.py"

    def runs_on(self, device: str) -> bool:
        """Whether the scenario can run on `device` ("cpu" or "cuda")."""
        return device == "cuda" or not self.needs_cuda


def _kind(key: str) -> str:
    """Marker for a record whose envelope key is `key` (the key always comes first)."""
    return '{"%s": ' % key


def _artifact(name: str) -> str:
    """Marker for an `artifact` record (or chromium event) called `name`."""
    return '"name": "%s"' % name


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "inference",
        "one frame, no graph breaks, Inductor under torch.no_grad",
        expect=(
            _kind("dynamo_start"),
            _kind("aot_inference_graph"),
            _kind("inductor_output_code"),
            _kind("compilation_metrics"),
        ),
    ),
    Scenario(
        "training",
        "forward+backward of a small nn.Module: joint/forward/backward graphs",
        expect=(
            _kind("aot_joint_graph"),
            _kind("aot_forward_graph"),
            _kind("aot_backward_graph"),
            _kind("bwd_compilation_metrics"),
        ),
    ),
    Scenario(
        "graph_break",
        "graph breaks inside an inlined helper: restarts and resume functions",
        expect=(
            _artifact("dynamo_graph_break_reason"),
            '"attempt": 1',
            '"restart_reasons": ["',
            "torch_dynamo_resume_in_",
        ),
    ),
    Scenario(
        "live_steps",
        "a compile, a recompile held open (TLPARSE_HARNESS_GATE), a graph break: what watch follows",
        expect=('"frame_compile_id": 1', _artifact("recompile_reasons"), "graph_break"),
    ),
    Scenario(
        "many_small",
        "24 small functions compiled one by one, a few recompiled: the many-small-compiles shape",
        expect=('"frame_id": 23', '"frame_compile_id": 1', _kind("dynamo_cpp_guards_str")),
        gzip_fixture=True,
    ),
    Scenario(
        "recompile",
        "shape, dtype and constant changes; automatic dynamic; recompile limit hit",
        expect=(
            '"frame_compile_id": 2',
            _artifact("recompile_reasons"),
            _artifact("automatic_dynamic"),
            _kind("create_symbol"),
            '"fail_reason": "Dynamo recompile limit exceeded',
        ),
    ),
    Scenario(
        "failure",
        "a raising backend, a fullgraph error and suppress_errors=True",
        expect=(
            '"fail_type": "BackendCompilerFailed"',
            '"fail_type": "Unsupported"',
            _artifact("dynamo_error"),
        ),
    ),
    Scenario(
        "export",
        "torch.export strict/non-strict with Dim and .item(), draft_export (DTRACE)",
        dtrace=True,
        min_logs=2,
        expect=(
            _kind("export"),
            _kind("exported_program"),
            _kind("guard_added"),
            _kind("expression_created"),
            _kind("create_unbacked_symbol"),
            _kind("propagate_real_tensors_provenance"),
            _kind("guard_on_data_dependent_error"),
        ),
    ),
    Scenario(
        "cache",
        "same program in two processes sharing a cache dir: misses, then hits",
        processes=2,
        process_labels=("cold cache, misses", "warm cache, hits"),
        min_logs=2,
        expect=(
            _artifact("fx_graph_cache_miss"),
            _artifact("aotautograd_cache_miss"),
            _artifact("fx_graph_cache_hit"),
            _artifact("aotautograd_cache_hit"),
        ),
    ),
    Scenario(
        "compiled_autograd",
        "compiled autograd over a backward pass, with a cache-miss recompile",
        expect=(
            '"compiled_autograd_id": 1',
            _kind("compiled_autograd_graph"),
            _artifact("compiled_autograd_compile_reasons"),
            _kind("dump_file"),
        ),
    ),
    Scenario(
        "distributed",
        "2 ranks, gloo, DDP with optimize_ddp: graph split per bucket",
        min_logs=2,
        expect=(
            '"rank": 0',
            '"rank": 1',
            _kind("optimize_ddp_split_graph"),
            _kind("optimize_ddp_split_child"),
        ),
    ),
    Scenario(
        "custom_op",
        "custom ops with good, missing and wrong fake kernels; draft_export (DTRACE)",
        dtrace=True,
        min_logs=2,
        expect=(
            _kind("missing_fake_kernel"),
            _kind("mismatched_fake_kernel"),
            '"compliant_custom_ops": ["harness::scaled_add"]',
        ),
    ),
    Scenario(
        "unbacked",
        ".item() and nonzero() as unbacked symbols under torch.compile",
        expect=(_kind("create_unbacked_symbol"), _kind("guard_added_fast")),
    ),
    Scenario(
        "transformer",
        "a 4-layer transformer trained at two sequence lengths: big graphs, a dynamic recompile",
        expect=(
            _kind("aot_joint_graph"),
            _kind("bwd_compilation_metrics"),
            '"frame_compile_id": 1',
            _kind("create_symbol"),
        ),
    ),
    Scenario(
        "reset_reuse",
        "torch._dynamo.reset() between two unrelated compiles: compile id [0/0] twice",
        expect=(
            _kind("dynamo_start"),
            '"co_name": "first_fn"',
            '"co_name": "second_fn"',
        ),
    ),
    Scenario(
        "reset_phases",
        "two functions compiled, torch._dynamo.reset(), the two again in the other order, then a recompile",
        expect=(
            _kind("dynamo_start"),
            _artifact("dynamo_graph_break_reason"),
            _artifact("recompile_reasons"),
            '"frame_compile_id": 1',
        ),
        gzip_fixture=True,  # ten compilation_metrics, each with torch's whole config
    ),
    Scenario(
        "train_warm",
        "a training step in two processes sharing a cache dir: lazy backward, cold then warm",
        processes=2,
        process_labels=("cold cache, misses", "warm cache, hits"),
        min_logs=2,
        expect=(
            _kind("bwd_compilation_metrics"),
            _artifact("fx_graph_cache_miss"),
            _artifact("aotautograd_cache_miss"),
            _artifact("fx_graph_cache_hit"),
            _artifact("aotautograd_cache_hit"),
        ),
    ),
    Scenario(
        "hops",
        "torch.cond, while_loop, flex_attention and nested_compile_region under Inductor",
        expect=(
            "true_graph_0",
            "false_graph_0",
            "cond_fn_0",
            "body_fn_0",
            "score_mod_0",
            "mask_fn_0",
            "subgraph_0",
        ),
    ),
    Scenario(
        "export_failure",
        "torch.export raising ConstraintViolationError: a branch's guard contradicts a Dim range",
        expect=(
            _kind("guard_added_fast"),
            '"fail_type": "ConstraintViolationError"',
            "satisfy the generated guard",
        ),
    ),
    Scenario(
        "processes",
        "a program, its forked DataLoader worker and a spawned child compiling into one trace folder",
        min_logs=3,
        expect=(_kind("dynamo_start"), _kind("compilation_metrics"), "child_step", "load_item"),
        gzip_fixture=True,
    ),
    Scenario(
        "quiet_parent",
        "a program compiles, goes quiet, then one at a time a spawn, fork, forkserver, Pool and two DataLoader children compile",
        min_logs=7,
        expect=(_kind("dynamo_start"), "spawned_step", "forked_step", "forkserver_step", "pool_step", "load_item",
                "multiprocessing/process.py", "_worker_loop"),
        gzip_fixture=True,
    ),
    Scenario(
        "parent_after_child",
        "a program compiles only after its spawned child compiled and ended; run twice into one folder (two runs)",
        processes=2,
        process_labels=("the first run", "the second run"),
        min_logs=4,
        expect=(_kind("dynamo_start"), "child_step", "main_step", "multiprocessing/spawn.py"),
        gzip_fixture=True,
    ),
    Scenario(
        "killed_midcompile",
        "SIGKILL during Inductor codegen: the log ends mid-compile",
        expect_killed=True,
        expect=(_kind("dynamo_start"), _kind("compilation_metrics"), '"frame_id": 1'),
    ),
    Scenario(
        "recompile_limit",
        "one frame recompiled on dtype changes until recompile_limit = 2 is hit",
        expect=(
            '"frame_compile_id": 1',
            _artifact("recompile_reasons"),
            '"fail_reason": "Dynamo recompile limit exceeded',
        ),
    ),
    Scenario(
        "gb_base",
        "a small program with one graph break (the base of the gb_extra pair)",
        expect=(_artifact("dynamo_graph_break_reason"), "torch_dynamo_resume_in_prepare"),
    ),
    Scenario(
        "gb_extra",
        "gb_base run with exactly one extra graph break (in head); same frames and lines",
        expect=(_artifact("dynamo_graph_break_reason"), "torch_dynamo_resume_in_head"),
    ),
    Scenario(
        "edit_base",
        "the base of the edit_* programs: a graph break in prepare, a recompile of step",
        expect=(_artifact("dynamo_graph_break_reason"), "torch_dynamo_resume_in_prepare", '"frame_compile_id": 1'),
    ),
    Scenario(
        "edit_shifted",
        "edit_base with four lines added above the model, checked out elsewhere: every line moves, no code changes",
        expect=(_artifact("dynamo_graph_break_reason"), "torch_dynamo_resume_in_prepare_at_14"),
    ),
    Scenario(
        "edit_renamed",
        "edit_base with prepare renamed prepare_input",
        expect=(_artifact("dynamo_graph_break_reason"), "torch_dynamo_resume_in_prepare_input"),
    ),
    Scenario(
        "edit_fixed",
        "edit_base with its graph break removed",
        expect=(_kind("compilation_metrics"), '"frame_compile_id": 1'),
    ),
    Scenario(
        "edit_newbreak",
        "edit_base with one more graph break, in head",
        expect=(_artifact("dynamo_graph_break_reason"), "torch_dynamo_resume_in_head"),
    ),
    Scenario(
        "edit_itembreak",
        "edit_base breaking on .item() in prepare instead (the base of the edit_otherbreak pair)",
        expect=(_artifact("dynamo_graph_break_reason"), "Tensor.item()", "torch_dynamo_resume_in_prepare_at_10"),
        gzip_fixture=True,
    ),
    Scenario(
        "edit_otherbreak",
        "edit_itembreak with its .item() break replaced by a print() break one line down: another break, of another kind",
        expect=(_artifact("dynamo_graph_break_reason"), "print", "torch_dynamo_resume_in_prepare_at_11"),
        gzip_fixture=True,
    ),
    Scenario(
        "skipped_frame",
        "a compiler.disable'd submodule and a graph break in a loop: Dynamo skips the frame, which runs eagerly",
        expect=(_artifact("dynamo_graph_break_reason"), "Failed to handle graph break gracefully", "frame skipped"),
    ),
    Scenario(
        "retry_fullgraph",
        "fullgraph=True fails on a graph break; the same function then compiles without it as [0/1] (a retry)",
        expect=('"fail_type": "Unsupported"', '"frame_compile_id": 1', _artifact("dynamo_graph_break_reason")),
    ),
    Scenario(
        "tensorify_restart",
        "a float argument recompiles, then Dynamo restarts that compile to specialise it (TensorifyScalarRestartAnalysis)",
        expect=("TensorifyScalarRestartAnalysis", '"attempt": 1'),
    ),
    Scenario(
        "backend_raises",
        "a backend raises (BackendCompilerFailed reaches the program), then a frame recompiles on an int until recompile_limit = 3",
        expect=('"fail_type": "BackendCompilerFailed"', '"config_suppress_errors": false', '"frame_compile_id": 3',
                '"fail_reason": "Dynamo recompile limit exceeded'),
        gzip_fixture=True,  # five compilation_metrics, each with torch's whole config
    ),
    Scenario(
        "backend_suppressed",
        "a backend raises under suppress_errors=True: the failure is logged, the frame runs eagerly",
        expect=('"fail_type": "BackendCompilerFailed"', '"config_suppress_errors": true'),
    ),
    Scenario(
        "recompile_restart",
        "a size change recompiles [0/1], which then restarts at an .item() graph break ([0/1_1])",
        expect=(_artifact("recompile_reasons"), '"frame_compile_id": 1, "attempt": 1', _artifact("dynamo_graph_break_reason")),
        gzip_fixture=True,
    ),
    Scenario(
        "config_patch",
        "[0/0] compiles under torch._dynamo.config.patch(capture_scalar_outputs=True), its recompile [0/1] without it "
        "and breaks at .item(); a call under set_stance('force_eager') compiles nothing",
        expect=('\\"capture_scalar_outputs\\": true', '\\"capture_scalar_outputs\\": false', "capture_scalar_outputs=False",
                '"frame_compile_id": 1, "attempt": 1'),
        gzip_fixture=True,  # four compilation_metrics, each with torch's whole config
    ),
    Scenario(
        "custom_backend",
        "a backend of the program's own (no AOTAutograd, no Inductor), a mark_dynamic input, a guard on ___stack0 "
        "after an .item() graph break, and the recompile limit reached on a Python int",
        expect=(
            '"dynamo_dynamic_indices": [0]',
            _kind("create_symbol"),
            "___stack0",
            _artifact("recompile_reasons"),
            '"fail_reason": "Dynamo recompile limit exceeded',
        ),
    ),
    Scenario(
        "dynamic_backward",
        "training with a dynamic-shape recompile whose backward Inductor compiles inside the forward compile",
        expect=('"is_backward": true', '"frame_compile_id": 1', _kind("bwd_compilation_metrics")),
    ),
    Scenario(
        "export_compile",
        "torch.export with Dim and Dim.AUTO succeeds, then torch.compile of ep.module()",
        expect=(_kind("create_symbol"), _artifact("fx_graph_cache_miss")),
    ),
    Scenario(
        "export_nonstrict_fail",
        "a non-strict export fails: the model branches on a dimension declared dynamic (no exported program logged)",
        expect=(_kind("create_symbol"), _kind("guard_added_fast")),
    ),
    Scenario(
        "export_qualified_dim",
        "failing non-strict exports written as most code does: torch.export.Dim in a dict, a call over several lines",
        processes=2,
        process_labels=("a Dim in a dict, on the call's first line", "a Dim bound to a name, a call one argument a line"),
        min_logs=2,
        expect=(_kind("create_symbol"), _kind("guard_added_fast"), 'torch.export.Dim(\\"batch\\")'),
    ),
    Scenario(
        "export_data_dependent",
        "a non-strict export fails on a data-dependent branch (`if h.mean() > 0:`), after one that succeeds: "
        "an unbacked symbol and the partial graph, no exception logged",
        expect=(_kind("create_unbacked_symbol"), _artifact("make_fx_fail_partial")),
    ),
    Scenario(
        "aot_inductor",
        "torch.export, then AOTInductor compiles and packages it (aoti_compile_and_package), loaded and run: "
        "compiling outside any compile id",
        expect=(_artifact("inductor_aot_wrapper_code"), _kind("compilation_metrics"), '"name": "compile_fx_aot"'),
        gzip_fixture=True,  # 157 KB of config dumps, chromium events and C++ wrapper code: 27 KB gzipped
    ),
    Scenario(
        "ddp_cache_race",
        "2 ranks, gloo, DDP with optimize_ddp, one cache: rank 0 misses, rank 1 (started later) hits",
        min_logs=2,
        expect=('"rank": 0', '"rank": 1', _artifact("fx_graph_cache_hit"), _artifact("fx_graph_cache_miss")),
    ),
    Scenario(
        "collectives",
        "2 CPU ranks, compiler collectives on, f32[4] vs f32[5]: one dynamic graph on both",
        min_logs=2,
        expect=(
            '"rank": 0',
            '"rank": 1',
            _artifact("compiler_collective"),
            '"attempt": 1',
            _kind("create_symbol"),
        ),
    ),
    Scenario(
        "collectives_desync",
        "compiler collectives; under compile id [1/0] rank 0 and rank 1 compile different code",
        min_logs=2,
        expect=(
            _artifact("compiler_collective"),
            '"co_name": "rank0_fn"',
            '"co_name": "rank1_fn"',
        ),
    ),
    Scenario(
        "collectives_gloo_fail",
        "compiler collectives over plain gloo: the compile fails on every rank (TypeError)",
        min_logs=2,
        expect=(
            '"rank": 1',
            _artifact("compiler_collective"),
            '"fail_type": "TypeError"',
        ),
    ),
    Scenario(
        "torchrun_ddp",
        "torchrun, 2 gloo ranks, DDP: only rank 1 breaks the graph (a debug print) and recompiles (last batch)",
        min_logs=2,
        gzip_fixture=True,
        expect=('"rank": 0', '"rank": 1', _artifact("dynamo_graph_break_reason"), _artifact("recompile_reasons")),
    ),
    Scenario(
        "torchrun_fsdp2",
        "torchrun, 2 gloo ranks, FSDP2 (fully_shard): only rank 1 recompiles (last batch)",
        min_logs=2,
        gzip_fixture=True,
        expect=('"rank": 0', '"rank": 1', _artifact("recompile_reasons")),
    ),
    Scenario(
        "torchrun_rank_fails",
        "torchrun, 2 gloo ranks, fullgraph=True: rank 1's compile raises at its debug print, torchrun stops rank 0",
        min_logs=2,
        gzip_fixture=True,
        expect=('"rank": 0', '"rank": 1', '"fail_type": '),
    ),
    Scenario(
        "torchrun_rank_killed",
        "torchrun, 2 gloo ranks, DDP: rank 1 is SIGKILLed during Inductor codegen, torchrun stops rank 0",
        min_logs=2,
        gzip_fixture=True,
        expect=('"rank": 0', '"rank": 1', _kind("dynamo_start")),
    ),
    Scenario(
        "collectives_shapes",
        "2 CPU ranks without compiler collectives: static graphs for f32[4] and f32[5]",
        min_logs=2,
        expect=('"rank": 0', '"rank": 1', '"size": [4]', '"size": [5]'),
    ),
    Scenario(
        "triton",
        "Inductor Triton kernels in the output code",
        needs_cuda=True,
        expect=(_kind("inductor_output_code"), "@triton.jit"),
    ),
    Scenario(
        "cudagraphs",
        'mode="reduce-overhead" called several times: CUDA graph record/replay',
        needs_cuda=True,
        expect=('"CUDAGraphNode.record"',),
    ),
    Scenario(
        "autotune",
        'mode="max-autotune" on a matmul: template autotuning',
        needs_cuda=True,
        expect=("_template_autotuning",),
    ),
    Scenario(
        "cuda_training",
        "training steps on CUDA, batch size changed: Triton forward/backward kernels, a dynamic recompile",
        needs_cuda=True,
        expect=(_kind("bwd_compilation_metrics"), "@triton.jit", '"frame_compile_id": 1'),
    ),
    Scenario(
        "skip_base",
        "a training loop over Linear+relu layers whose forward compiles (the base of the skip_nan pair)",
        expect=(_kind("compilation_metrics"), _kind("bwd_compilation_metrics"), '"co_name": "forward"'),
    ),
    Scenario(
        "skip_nan",
        "skip_base with a NaN check in its layer loop: a graph break in a loop, Dynamo skips the forward",
        expect=(_artifact("dynamo_graph_break_reason"), "Failed to handle graph break gracefully", "frame skipped"),
    ),
    Scenario(
        "optimizer_step",
        "a compiled optimizer step (SGD on a tiny Linear, aot_eager): torch's own torch._dynamo.graph_break() in optimizer.py",
        expect=(_artifact("dynamo_graph_break_reason"), "torch/optim/optimizer.py", _kind("compilation_metrics")),
        gzip_fixture=True,
    ),
    Scenario(
        "vllm_piecewise",
        "vLLM's piecewise compile imitated on CPU: split at attention, each piece compiled for sizes 4, 2 and a range, pass dumps",
        expect=(
            _artifact("vllm_compile_event"),
            _artifact("vllm_compilation_config"),
            _artifact("vllm_patterns.SinCosFusionPass"),
            _artifact("vllm_piecewise_split_graph"),
            _artifact("vllm_piecewise_compile_start"),
            _artifact("vllm_submod_2"),
            _artifact("before_post_grad_graph"),
            _artifact("vllm_post_grad.0.SinCosFusionPass"),
            _artifact("vllm_post_grad.1.SiluMulFusionPass"),
            '"is_single_size": true',
        ),
    ),
)

BY_NAME: dict[str, Scenario] = {s.name: s for s in SCENARIOS}
