"""GEPA adapter for BLIS policies (standard library only).

GEPA optimises the text components of a candidate with an adapter that
evaluates a batch and builds a reflective dataset from the traces. Here a
candidate is a whole policy bundle, one component per decision point:

    {"routing": "<Starlark: def route(request, cluster)>",
     "admission": "<Starlark: def admit(request, cluster)>",
     "scheduler": "kind: decision_tree\\ntree: {score: ...}",   # a stage as YAML
     "bundle": "id: cand-3\\npredictor: {kind: class}"}       # top-level keys

Each of admission, priority, routing, scheduler, preemption and autoscaler
is Starlark source (it defines the stage's entrypoint, docs/policies.md) or
the YAML of the stage (kind: parameterized | decision_tree | starlark);
"bundle" holds the bundle's other keys (id, predictor, sandbox, ...). A
candidate may instead be {"router": "<YAML router: section>"}. A batch is
a list of workloads (blis-synth specs or requests tables), the score is
blis-eval's primary, and the reflective dataset is, per workload and for
each component updated, the reflective summary (outcome, issues, regret,
worst decisions with their best alternative, recurring patterns) with the
whole bundle it came from. It follows gepa's GEPAAdapter protocol without
importing gepa.
"""

import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import blis_eval  # noqa: E402

STAGES = ("admission", "priority", "routing", "scheduler", "preemption", "autoscaler")
ENTRYPOINTS = {"admission": "admit", "priority": "priority", "routing": "route",
               "scheduler": "schedule", "preemption": "preempt", "autoscaler": "scale"}
COMPONENTS = STAGES + ("bundle", "router")


@dataclass
class EvaluationBatch:
    outputs: list
    scores: list
    trajectories: list = field(default=None)


def is_starlark(stage, text):
    """Starlark source defines the stage's entrypoint; anything else is the
    stage's YAML."""
    return ("def %s(" % ENTRYPOINTS[stage]) in text


def bundle_text(candidate, workdir):
    """The policy bundle a candidate stands for (Starlark components go to
    files next to it). Unknown components are an error, not ignored."""
    unknown = sorted(set(candidate) - set(COMPONENTS))
    if unknown:
        raise ValueError("unknown component(s) %s: expected %s" % (", ".join(unknown), ", ".join(COMPONENTS)))
    lines = [candidate["bundle"].rstrip("\n")] if "bundle" in candidate else ["id: gepa-candidate"]
    for stage in STAGES:
        text = candidate.get(stage)
        if text is None:
            continue
        if is_starlark(stage, text):
            path = os.path.join(workdir, stage + ".star")
            with open(path, "w") as f:
                f.write(text)
            lines.append("%s: {kind: starlark, file: %s}" % (stage, json.dumps(path)))
        else:
            lines.append(stage + ":")
            lines += ["  " + line for line in text.rstrip("\n").splitlines()]
    return "\n".join(lines) + "\n"


class BlisAdapter:
    """evaluate(batch, candidate, capture_traces) and make_reflective_dataset(...)."""

    def __init__(self, **cfg):
        self.cfg = blis_eval.config(**cfg)

    def _write(self, candidate, workdir):
        if "router" in candidate:
            if len(candidate) > 1:
                raise ValueError("a router: section is a candidate alone, not with bundle components")
            path, text = os.path.join(workdir, "candidate.yaml"), candidate["router"]
        else:
            path, text = os.path.join(workdir, "candidate.bundle.yaml"), bundle_text(candidate, workdir)
        with open(path, "w") as f:
            f.write(text)
        return path, text

    def evaluate(self, batch, candidate, capture_traces=False):
        outputs, scores, traj = [], [], []
        for workload in batch:
            cfg = dict(self.cfg)
            if workload.endswith((".arrow", ".arrows", ".feather", ".parquet")):
                cfg["requests"] = workload
            else:
                cfg["requests"], cfg["workload"] = "", workload
            workdir = tempfile.mkdtemp(prefix="blis-gepa-")
            try:
                try:
                    path, text = self._write(candidate, workdir)
                    r = blis_eval.run(path, cfg, workdir)
                except ValueError as e:  # a malformed candidate: scored, not raised
                    text, r = "", {"valid": False, "error": str(e), "primary": None, "metrics": {}, "summary": ""}
            finally:
                if not cfg["keep_artifacts"]:
                    shutil.rmtree(workdir, ignore_errors=True)
            outputs.append(r)
            scores.append(blis_eval.score(r))
            if capture_traces:
                traj.append({"workload": workload, "valid": r.get("valid"), "error": r.get("error", ""),
                             "summary": r.get("summary", ""), "metrics": r.get("metrics", {}), "bundle": text})
        return EvaluationBatch(outputs=outputs, scores=scores, trajectories=traj if capture_traces else None)

    def make_reflective_dataset(self, candidate, eval_batch, components_to_update):
        """For each component to update, one record per workload: the
        component's text, the whole bundle it ran in, what happened (the
        summary) and the score."""
        out = {}
        for comp in components_to_update:
            records = []
            for t, s in zip(eval_batch.trajectories or [], eval_batch.scores):
                feedback = t["summary"]
                if not t["valid"]:
                    feedback = "INVALID: %s\n\n%s" % (t["error"], feedback)
                records.append({"Inputs": {"workload": t["workload"], "component": comp, "bundle": t["bundle"]},
                                "Generated Outputs": candidate.get(comp, ""),
                                "Feedback": feedback,
                                "Score": s})
            out[comp] = records
        return out
