"""Graph and output-code normalisation: the run-to-run noise goes, the program stays, line by line."""

from __future__ import annotations

from tlparse_py.analysis.facts import normalise_code, normalise_graph


def test_noise_in_a_graph_goes_and_code_stays():
    graph = (
        "class GraphModule(torch.nn.Module):   \r\n"
        "    def forward(self, L_x_: \"f32[8]\"):\n"
        "        # File: /home/me/prog.py:12 in f, code: y = x.sin()\n"
        "        sin = torch.sin(l_x_);  l_x_ = None  # File: /home/me/prog.py:12 stays (not at the line start)\n"
        "        ___check_obj_id(L['m'], 140234234234)  # at 0x7f00deadbeef\n"
        "        hid = 1234567; id = 7654321\n"
        '  File "/home/me/prog.py", line 40, in <module>\n'
        "\n  \n"
    )
    assert normalise_graph(graph).split("\n") == [
        "class GraphModule(torch.nn.Module):",
        "    def forward(self, L_x_: \"f32[8]\"):",
        "        # File: <file> in f, code: y = x.sin()",
        "        sin = torch.sin(l_x_);  l_x_ = None  # File: /home/me/prog.py:12 stays (not at the line start)",
        "        ___check_obj_id(L['m'], <id>)  # at 0x?",
        "        hid = 1234567; id = <id>",
        '  File "<file>", in <module>',
    ]


def test_output_code_loses_kernel_paths_hashes_and_the_benchmark_harness():
    code = (
        "# kernel path: /tmp/torchinductor_me/ab/cabcdefghijklmnopqrstuvwxyz0123.py\n"
        "x = 1  # kernel path: stays\n"
        "    # kernel path: /tmp/x.py\n"
        "src = '/tmp/torchinductor_me/ab/cabcdefghijklmnopqrstuvwxyz0123.py'\n"
        "key = 'f00dfeedf00dfeedf00dfeedf00dfeed1'\n"
        "def benchmark_compiled_module(times=10):\n"
        "    return 8\n"
    )
    assert normalise_code(code).split("\n") == [
        "x = 1  # kernel path: stays",
        "src = '<cache path>'",
        "key = '<hash>'",
    ]
