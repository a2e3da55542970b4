"""A stand-in for the CUPTI worker that answers with answers a real worker gave on the H200.

``python cupti_replay_worker.py --answers FILE.jsonl [--delay-s S] [--problem P --warmup N]``:
the first line of FILE is the ``ready`` (or ``fail``) event, written at once with ``--problem``,
else (a standby, as ``CuptiProfiler`` starts it) once the first request loads a problem; each
request on stdin is answered with the next recorded answer for its op (``check`` ->
``checked``, ``collect`` -> ``collected``), after sleeping ``--delay-s`` for a collect; a
collect that asks for another replay than the answer was recorded with is an error. Used to
drive the real ``CuptiProfiler`` (its pipes, deadlines and parsing) on a machine without a GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

EVENT = {"check": "checked", "collect": "collected"}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--answers", required=True)
    parser.add_argument("--delay-s", type=float, default=0.0)
    parser.add_argument("--problem")
    parser.add_argument("--warmup")
    args = parser.parse_args()
    with open(args.answers, encoding="utf-8") as handle:
        first, *answers = [json.loads(line) for line in handle if line.strip()]
    if args.problem is None:
        line = sys.stdin.readline()
        if not line:
            return 0  # a standby nobody needed
        if json.loads(line).get("op") != "load":
            print(json.dumps({"event": "fail", "error": "expected a load request"}), flush=True)
            return 2
    print(json.dumps(first), flush=True)
    if first.get("event") != "ready":
        return 2
    for line in sys.stdin:
        request = json.loads(line)
        op = request.get("op")
        match = next((a for a in answers if a.get("event") == EVENT.get(op)), None)
        if match is None:
            print(json.dumps({"event": "error", "error": f"nothing recorded for {op}"}), flush=True)
            continue
        recorded, asked = match.get("replay", "kernel"), request.get("replay", "kernel")
        if op == "collect" and recorded != asked:
            error = f"recorded with {recorded} replay, asked for {asked}"
            print(json.dumps({"event": "error", "error": error}), flush=True)
            continue
        answers.remove(match)
        if op == "collect":
            time.sleep(args.delay_s)
        print(json.dumps(match), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
