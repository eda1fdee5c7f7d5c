"""GEPA adapter for BLIS policies (standard library only).

GEPA optimises text components of a candidate with an adapter that
evaluates a batch and builds a reflective dataset from the traces. Here a
candidate is ``{"routing": "<Starlark source with def route(request,
cluster)>"}`` (or ``{"router": "<YAML router: section>"}``), a batch is a
list of workloads (blis-synth specs or requests tables), the score is
blis-eval's primary, and the reflective dataset is the reflective summary
with the worst decisions, per workload.
It follows gepa's GEPAAdapter protocol without importing gepa.
"""

import os
import sys
import tempfile
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import blis_eval  # noqa: E402


@dataclass
class EvaluationBatch:
    outputs: list
    scores: list
    trajectories: list = field(default=None)


class BlisAdapter:
    """evaluate(batch, candidate, capture_traces) and make_reflective_dataset(...)."""

    def __init__(self, **cfg):
        self.cfg = blis_eval.config(**cfg)

    def _write(self, candidate, workdir):
        if "routing" in candidate:
            path, text = os.path.join(workdir, "candidate.star"), candidate["routing"]
        else:
            path, text = os.path.join(workdir, "candidate.yaml"), candidate["router"]
        with open(path, "w") as f:
            f.write(text)
        return path

    def evaluate(self, batch, candidate, capture_traces=False):
        outputs, scores, traj = [], [], []
        for workload in batch:
            cfg = dict(self.cfg)
            if workload.endswith((".arrow", ".feather", ".parquet")):
                cfg["requests"] = workload
            else:
                cfg["requests"], cfg["workload"] = "", workload
            if cfg["keep_artifacts"]:
                workdir = tempfile.mkdtemp(prefix="blis-gepa-")
                r = blis_eval.run(self._write(candidate, workdir), cfg, workdir)
            else:
                with tempfile.TemporaryDirectory(prefix="blis-gepa-") as workdir:
                    r = blis_eval.run(self._write(candidate, workdir), cfg, workdir)
            outputs.append(r)
            scores.append(blis_eval.score(r))
            if capture_traces:
                traj.append({"workload": workload, "valid": r.get("valid"), "error": r.get("error", ""),
                             "summary": r.get("summary", ""), "metrics": r.get("metrics", {})})
        return EvaluationBatch(outputs=outputs, scores=scores, trajectories=traj if capture_traces else None)

    def make_reflective_dataset(self, candidate, eval_batch, components_to_update):
        """One record per workload for each component: what the policy was,
        what happened (the summary: outcome vs targets, top issues, regret,
        worst decisions with their context and best alternative), and the
        score."""
        records = []
        for t, s in zip(eval_batch.trajectories or [], eval_batch.scores):
            feedback = t["summary"]
            if not t["valid"]:
                feedback = "INVALID: %s\n\n%s" % (t["error"], feedback)
            records.append({"Inputs": {"workload": t["workload"]},
                            "Generated Outputs": candidate.get("routing", candidate.get("router", "")),
                            "Feedback": feedback,
                            "Score": s})
        return {c: list(records) for c in components_to_update}
