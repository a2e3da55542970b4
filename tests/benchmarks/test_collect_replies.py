"""benchmarks/collect_replies.py: one reply file per request into the JSONL replies import
takes, and back through ``import_replies`` into a real store."""

from __future__ import annotations

import gzip
import json

from autoprofiler.llm import SamplingParams
from autoprofiler.llm.batch import BatchRequest, export_requests, import_replies
from autoprofiler.store import Store

from .conftest import import_benchmark

collect_replies = import_benchmark("collect_replies")


def test_collected_replies_import_and_the_unanswered_are_listed(tmp_path):
    store = Store(tmp_path / "store.sqlite")
    requests = [
        BatchRequest(f"L1/{i}_p", "none", "anthropic:claude",
                     ({"role": "user", "content": f"task {i}"},), SamplingParams())
        for i in range(3)
    ]  # fmt: skip
    plain = tmp_path / "requests.jsonl"
    export_requests(requests, plain, store, "anthropic")
    packed = tmp_path / "requests.jsonl.gz"
    with gzip.open(packed, "wt") as handle:
        handle.write(plain.read_text())
    folder = tmp_path / "replies"
    folder.mkdir()
    for request in requests[:2]:
        (folder / f"{request.custom_id}.md").write_text(f"```python\n# {request.problem}\n```")
    out = tmp_path / "replies.jsonl.gz"  # compressed both ways, as committed
    written, missing = collect_replies.collect([packed], folder, "claude (test)", out)
    assert (written, missing) == (2, [requests[2].custom_id])
    with gzip.open(out, "rt") as handle:
        rows = [json.loads(line) for line in handle]
    assert rows[0] == {"custom_id": requests[0].custom_id, "model": "claude (test)",
                       "content": "```python\n# L1/0_p\n```"}  # fmt: skip
    assert import_replies(out, store, "") == 2
    store.close()
