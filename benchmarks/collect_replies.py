"""Gather replies written one file per request into the plain JSONL ``replies import`` reads.

The batch workflow's answers may come back as one text file per request, named by its
``custom_id`` (``REPLIES/<custom_id>.md``), e.g. when each request was answered by a model in
a fresh session of its own. This writes ``{custom_id, content, model}`` per reply, in the
order of the requests file, and lists the requests with no reply yet:

    python benchmarks/collect_replies.py requests.jsonl REPLIES --model "NAME" -o replies.jsonl
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path


def _open(path: Path, mode: str):
    return (
        gzip.open(path, mode + "t", encoding="utf-8")
        if path.suffix == ".gz"
        else path.open(mode, encoding="utf-8")
    )


def collect(requests: list[Path], folder: Path, model: str, out: Path) -> tuple[int, list[str]]:
    """Write the replies found; (how many, the custom_ids still unanswered)."""
    written, missing = 0, []
    with _open(out, "w") as handle:
        for path in requests:
            with _open(path, "r") as lines:
                for line in lines:
                    custom_id = json.loads(line)["custom_id"]
                    reply = folder / f"{custom_id}.md"
                    if not reply.is_file():
                        missing.append(custom_id)
                        continue
                    row = {"custom_id": custom_id, "content": reply.read_text(encoding="utf-8"),
                           "model": model}  # fmt: skip
                    handle.write(json.dumps(row) + "\n")
                    written += 1
    return written, missing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("requests", type=Path, nargs="+", help="exported requests (JSONL[.gz])")
    parser.add_argument("replies", type=Path, help="folder of <custom_id>.md replies")
    parser.add_argument("--model", required=True, help="the model that wrote them")
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args(argv)
    written, missing = collect(args.requests, args.replies, args.model, args.output)
    print(f"{written} replies written to {args.output}; {len(missing)} requests unanswered")
    return 0


if __name__ == "__main__":
    sys.exit(main())
