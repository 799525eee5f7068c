"""Re-runs the `$ stepscope ...` commands in each example README and writes their real output.

    python examples/refresh.py           # rewrite the READMEs
    python examples/refresh.py --check   # exit 1 if any README shows stale output

Each example's workload is recorded to `trace.duckdb` in a scratch folder, where
the commands then run (80 columns, no colour), exactly as a reader would type them.
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "docs"))
from refresh_docs import refresh, stepscope  # noqa: E402  (docs/, on the path above)
from refresh_docs import render as render_page  # noqa: E402

EXAMPLES = ("preemption_storm", "head_of_line_blocking", "prefix_cache_reuse",
            "chunked_prefill_long_prompts", "priority_inversion")  # fmt: skip
COLUMNS = 80


def render(readme: str, workload: Path) -> str:
    """The README with every console block's output regenerated."""

    def record(folder: Path) -> None:
        stepscope(["record", str(workload), "-o", "trace.duckdb"], folder, COLUMNS)

    return render_page(readme, prepare=record, columns=COLUMNS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a README is stale")
    args = parser.parse_args()
    readmes = {
        HERE / name / "README.md": functools.partial(render, workload=HERE / name / "workload.json")
        for name in EXAMPLES
    }
    refresh(readmes, check=args.check)


if __name__ == "__main__":
    main()
