"""Tests of the OpenEvolve evaluator and the GEPA adapter against fixed
candidates: the good policy must score better than the bad one. Run with
plain python3 (the Go test cmd/blis-eval TestPythonExamples does, after
building blis-eval and pointing BLIS_EVAL at it)."""

import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import blis_eval  # noqa: E402
import gepa_adapter  # noqa: E402
import openevolve_evaluator  # noqa: E402

GOOD = os.path.join(HERE, "candidates", "good.star")  # Starlark: least loaded
BAD = os.path.join(HERE, "candidates", "bad.star")  # Starlark: all to the first replica
RUNAWAY = os.path.join(HERE, "candidates", "runaway.star")  # legal, ~850,000 steps a call
GOOD_ROUTER = os.path.join(HERE, "candidates", "good.yaml")  # a router: section
BAD_ROUTER = os.path.join(HERE, "candidates", "bad.yaml")


class OpenEvolveTest(unittest.TestCase):
    def test_good_beats_bad(self):
        good = openevolve_evaluator.evaluate(GOOD)
        bad = openevolve_evaluator.evaluate(BAD)
        self.assertEqual(good["valid"], 1.0, good.get("error"))
        self.assertGreater(good["combined_score"], bad["combined_score"])
        self.assertLess(good["ttft_p99.interactive"], bad["ttft_p99.interactive"])
        self.assertIn("## Outcome vs targets", good["summary"])

    def test_router_sections(self):
        good = openevolve_evaluator.evaluate(GOOD_ROUTER)
        bad = openevolve_evaluator.evaluate(BAD_ROUTER)
        self.assertGreater(good["combined_score"], bad["combined_score"])

    def test_starlark_error_is_invalid(self):
        path = os.path.join(os.environ.get("TMPDIR", "/tmp"), "blis-broken.star")
        with open(path, "w") as f:
            f.write("def route(request, cluster):\n    return cluster.replicas[99].id\n")
        r = openevolve_evaluator.evaluate(path)
        self.assertEqual(r["valid"], 0.0)
        self.assertEqual(r["combined_score"], -1e9)

    def test_invalid_candidate_is_scored_not_raised(self):
        path = os.path.join(os.environ.get("TMPDIR", "/tmp"), "blis-invalid-candidate.yaml")
        with open(path, "w") as f:
            f.write("router:\n  routing: no-such-policy\n")
        r = openevolve_evaluator.evaluate(path)
        self.assertEqual(r["valid"], 0.0)
        self.assertIn("no-such-policy", r["error"])
        self.assertEqual(r["combined_score"], -1e9)


class BudgetTest(unittest.TestCase):
    """A search loop survives a runaway candidate and a broken harness."""

    def test_runaway_stopped_by_timeout(self):
        cfg = blis_eval.config(timeout="1s")
        r = blis_eval.run(RUNAWAY, cfg)
        self.assertFalse(r["valid"])
        self.assertIn("timeout", r["error"])
        self.assertEqual(blis_eval.score(r), blis_eval.INVALID_SCORE)

    def test_runaway_stopped_by_step_budget(self):
        r = blis_eval.run(RUNAWAY, blis_eval.config(max_run_steps=5000000))
        self.assertFalse(r["valid"])
        self.assertIn("whole-run step budget exceeded", r["error"])

    def test_missing_binary_is_a_result(self):
        r = blis_eval.run(GOOD, blis_eval.config(blis_eval="/nonexistent/blis-eval"))
        self.assertFalse(r["valid"])
        self.assertTrue(r["harness_error"])
        self.assertIn("blis-eval not found", r["error"])
        oe = openevolve_evaluator
        saved = os.environ.get("BLIS_EVAL")
        os.environ["BLIS_EVAL"] = "/nonexistent/blis-eval"
        try:
            out = oe.evaluate(GOOD)
        finally:
            if saved is None:
                del os.environ["BLIS_EVAL"]
            else:
                os.environ["BLIS_EVAL"] = saved
        self.assertEqual(out["combined_score"], blis_eval.INVALID_SCORE)
        self.assertIn("not found", out["error"])

    def test_killed_past_the_budget(self):
        # A blis-eval that outlives its --timeout (here a stand-in that
        # sleeps) is killed and reported, not waited for.
        saved = blis_eval.KILL_GRACE_S
        blis_eval.KILL_GRACE_S = 0.5
        with tempfile.TemporaryDirectory(prefix="blis-eval-sleeps-") as d:
            stub = os.path.join(d, "blis-eval")
            with open(stub, "w") as f:
                f.write("#!/bin/sh\nexec sleep 30\n")
            os.chmod(stub, 0o755)
            try:
                r = blis_eval.run(GOOD, blis_eval.config(blis_eval=stub, timeout="500ms"))
            finally:
                blis_eval.KILL_GRACE_S = saved
        self.assertFalse(r["valid"])
        self.assertIn("killed", r["error"])


class GEPATest(unittest.TestCase):
    def test_evaluate_and_reflect(self):
        a = gepa_adapter.BlisAdapter()
        wl = os.path.join(HERE, "workload.yaml")
        with open(GOOD) as f:
            good = {"routing": f.read()}
        with open(BAD) as f:
            bad = {"routing": f.read()}
        eg = a.evaluate([wl], good, capture_traces=True)
        eb = a.evaluate([wl], bad, capture_traces=True)
        self.assertGreater(eg.scores[0], eb.scores[0])
        ds = a.make_reflective_dataset(bad, eb, ["routing"])
        rec = ds["routing"][0]
        self.assertIn("## Top issues", rec["Feedback"])
        self.assertIn("Worst decisions", rec["Feedback"])
        self.assertEqual(rec["Generated Outputs"], bad["routing"])

    def test_whole_bundle(self):
        # A candidate is a whole bundle: Starlark and YAML stages and the
        # bundle's own keys, each a component GEPA can rewrite.
        a = gepa_adapter.BlisAdapter()
        wl = os.path.join(HERE, "workload.yaml")
        with open(GOOD) as f:
            route = f.read()
        admit = ("def admit(request, cluster):\n"
                 "    if cluster.queued > 1000:\n"
                 "        return (\"reject\", \"queue full\")\n"
                 "    return \"admit\"\n")
        sched = "kind: parameterized\ntemplate: shortest-first\n"
        cand = {"bundle": "id: gepa-whole\npredictor: {kind: class}", "routing": route, "admission": admit, "scheduler": sched}
        e = a.evaluate([wl], cand, capture_traces=True)
        self.assertTrue(e.outputs[0]["valid"], e.outputs[0].get("error"))
        bundle = e.trajectories[0]["bundle"]
        for want in ("id: gepa-whole", "routing: {kind: starlark", "admission: {kind: starlark", "scheduler:\n  kind: parameterized"):
            self.assertIn(want, bundle)
        ds = a.make_reflective_dataset(cand, e, ["admission", "scheduler"])
        self.assertEqual(ds["scheduler"][0]["Generated Outputs"], sched)
        self.assertIn("admission: {kind: starlark", ds["admission"][0]["Inputs"]["bundle"])
        # A bad component makes the candidate invalid, scored, not raised.
        bad = dict(cand, admission="def admit(request, cluster):\n    return 7\n")
        eb = a.evaluate([wl], bad, capture_traces=True)
        self.assertEqual(eb.scores[0], blis_eval.INVALID_SCORE)
        self.assertIn("admit returned", eb.trajectories[0]["error"])
        eu = a.evaluate([wl], {"routng": route})
        self.assertIn("unknown component(s) routng", eu.outputs[0]["error"])


if __name__ == "__main__":
    unittest.main()
