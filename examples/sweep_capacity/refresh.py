"""Re-runs the `$ stepscope ...` commands of this README on the bundled trace and writes their
real output (and the SVG plots they write) back here.

    python examples/sweep_capacity/refresh.py           # rewrite README.md and the plots
    python examples/sweep_capacity/refresh.py --check   # exit 1 if README.md is stale

The commands run one after another in a scratch folder holding `vllm-bench.duckdb`,
at 80 columns with no colour, exactly as a reader would type them there; a path inside that
folder is shown relative to it, as in `examples/sweep_capacity`.
"""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from refresh import COLUMNS, stepscope  # noqa: E402  (the other examples' runner)

TRACE = "vllm-bench.duckdb"
_CONSOLE_BLOCK = re.compile(r"```console\n(.*?)```", re.DOTALL)


def render(readme: str, plots_to: Path | None = None) -> str:
    """The README with every console block's output regenerated; plots copied to `plots_to`."""
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        shutil.copy(HERE / TRACE, folder / TRACE)

        def rerun(match: re.Match[str]) -> str:
            blocks = []
            for line in match.group(1).splitlines():
                if line.startswith("$ "):
                    args = shlex.split(line[2:])
                    assert args[0] == "stepscope", line
                    output = stepscope(args[1:], folder, COLUMNS)
                    output = output.replace(f"{folder.resolve()}/", "")
                    blocks.append(f"{line}\n{output.rstrip()}\n")
            return "```console\n" + "".join(blocks) + "```"

        fresh = _CONSOLE_BLOCK.sub(rerun, readme)
        for plot in folder.glob("*.svg"):
            if plots_to is not None:
                shutil.copy(plot, plots_to / plot.name)
        return fresh


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if README.md is stale")
    args = parser.parse_args()
    readme = HERE / "README.md"
    text = readme.read_text()
    fresh = render(text, None if args.check else HERE)
    if args.check:
        sys.exit(0 if fresh == text else 1)
    readme.write_text(fresh)


if __name__ == "__main__":
    main()
