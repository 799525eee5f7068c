"""Re-runs the `$ stepscope ...` commands in each example README and writes their real output.

    python examples/refresh.py           # rewrite the READMEs
    python examples/refresh.py --check   # exit 1 if any README shows stale output

Each example's workload is recorded to `trace.duckdb` in a scratch folder, where
the commands then run (80 columns, no colour), exactly as a reader would type them.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXAMPLES = ("preemption_storm", "head_of_line_blocking", "prefix_cache_reuse",
            "chunked_prefill_long_prompts", "priority_inversion")  # fmt: skip
_CONSOLE_BLOCK = re.compile(r"```console\n(.*?)```", re.DOTALL)


def stepscope(args: list[str], cwd: Path) -> str:
    env = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1", "TERM": "dumb"}
    result = subprocess.run(
        [sys.executable, "-m", "stepscope", *args],
        cwd=cwd, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    return result.stdout + result.stderr


def render(readme: str, workload: Path) -> str:
    """The README with every console block's output regenerated."""
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        stepscope(["record", str(workload), "-o", "trace.duckdb"], folder)

        def rerun(match: re.Match[str]) -> str:
            commands = [line for line in match.group(1).splitlines() if line.startswith("$ ")]
            blocks = []
            for command in commands:
                args = shlex.split(command[2:])
                assert args[0] == "stepscope", command
                blocks.append(f"{command}\n{stepscope(args[1:], folder).rstrip()}\n")
            return "```console\n" + "".join(blocks) + "```"

        return _CONSOLE_BLOCK.sub(rerun, readme)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a README is stale")
    args = parser.parse_args()
    stale = []
    for name in EXAMPLES:
        readme = HERE / name / "README.md"
        current = readme.read_text()
        fresh = render(current, HERE / name / "workload.json")
        if fresh != current:
            stale.append(name)
            if not args.check:
                readme.write_text(fresh)
    if args.check and stale:
        print(f"stale example output: {', '.join(stale)}", file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
