"""OpenEvolve evaluator for BLIS routing policies (standard library only).

OpenEvolve calls ``evaluate(program_path)`` on each evolved program and
ranks programs by the ``combined_score`` of the returned dict. The program
is a Starlark routing policy (``def route(request, cluster)``, returning a
replica id; see docs/policies.md), which blis-eval runs sandboxed as a
one-stage policy bundle. A policy bundle or a YAML ``router:`` section
works too.

    evaluator_file: examples/evolve/openevolve_evaluator.py   # OpenEvolve config
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import blis_eval  # noqa: E402


def evaluate(program_path):
    """Returns the metrics dict: combined_score, validity, each metric. A
    candidate blis-eval could not evaluate (missing binary, past its
    budget) scores as invalid with the reason, never raises."""
    r = blis_eval.run(program_path)
    out = {"combined_score": blis_eval.score(r), "valid": 1.0 if r.get("valid") else 0.0}
    for k, v in sorted(r.get("metrics", {}).items()):
        if v is not None:
            out[k] = float(v)
    if not r.get("valid"):
        out["error"] = r.get("error", "")
    # OpenEvolve passes extra string fields to the LLM as artifacts.
    out["summary"] = r.get("summary", "")
    return out


if __name__ == "__main__":
    import json

    print(json.dumps(evaluate(sys.argv[1]), indent=2, sort_keys=True))
