"""Tests of the OpenEvolve evaluator and the GEPA adapter against fixed
candidates: the good policy must score better than the bad one. Run with
plain python3 (the Go test cmd/blis-eval TestPythonExamples does, after
building blis-eval and pointing BLIS_EVAL at it)."""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import gepa_adapter  # noqa: E402
import openevolve_evaluator  # noqa: E402

GOOD = os.path.join(HERE, "candidates", "good.star")  # Starlark: least loaded
BAD = os.path.join(HERE, "candidates", "bad.star")  # Starlark: all to the first replica
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


    def test_missing_blis_eval_is_said(self):
        # A search loop gets an invalid score and a sentence, not a
        # FileNotFoundError traceback (issue 32, item 8).
        old = os.environ.get("BLIS_EVAL")
        os.environ["BLIS_EVAL"] = os.path.join(HERE, "no-such-blis-eval")
        try:
            r = openevolve_evaluator.evaluate(GOOD)
        finally:
            os.environ["BLIS_EVAL"] = old
        self.assertEqual(r["valid"], 0.0)
        self.assertEqual(r["combined_score"], -1e9)
        self.assertIn("cannot run blis-eval", r["error"])
        self.assertIn("BLIS_EVAL", r["error"])


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


if __name__ == "__main__":
    unittest.main()
