"""Scenario `aot_inductor`: a small model exported, compiled ahead of time by AOTInductor, loaded, run.

`torch._inductor.aoti_compile_and_package` compiles an ExportedProgram to a shared library (C++ on
CPU) packaged in a .pt2 file; `aoti_load_package` loads it back and it runs once. None of this is a
Dynamo frame compile: its Inductor records (graphs, output code, the cache lookup) are logged
outside any compile id, so the log holds real compiling whose time no compile reports. A report of
it must say its total compile time is unknown, never 0.
"""

import os
import tempfile

import torch


class Model(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * 2.0 + 1.0)


def main() -> None:
    model = Model().eval()
    x = torch.randn(2, 4)
    with torch.no_grad():
        ep = torch.export.export(model, (x,))
        package = os.path.join(tempfile.mkdtemp(), "model.pt2")
        torch._inductor.aoti_compile_and_package(ep, package_path=package)
        loaded = torch._inductor.aoti_load_package(package)
        torch.testing.assert_close(loaded(x), model(x))
    print("aot_inductor ok")


if __name__ == "__main__":
    main()
