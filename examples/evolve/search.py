"""Seeded random search over a parameterised routing template (standard
library only): the ``weighted`` router's load, kv and prefix weights, each
drawn uniformly from [0, 2], evaluated with blis-eval on
examples/workloads/mixed-tenants.yaml (two workload replications each) and compared
with the template's defaults (1, 1, 1), then both checked on a workload
realisation the search never saw. Deterministic for a given --seed.

    python3 examples/evolve/search.py --trials 30 --seed 1
"""

import argparse
import json
import os
import random
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import blis_eval  # noqa: E402


def candidate(w):
    return "router:\n  routing: weighted\n  weights: {load: %.3f, kv: %.3f, prefix: %.3f}\n" % w


def evaluate(w, cfg, workdir):
    path = os.path.join(workdir, "cand-%.3f-%.3f-%.3f.yaml" % w)
    with open(path, "w") as f:
        f.write(candidate(w))
    r = blis_eval.run(path, cfg, tempfile.mkdtemp(dir=workdir))
    return blis_eval.score(r), r


def main():
    with tempfile.TemporaryDirectory(prefix="blis-search-") as workdir:
        search(workdir)


def search(workdir):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workload", default=os.path.join(HERE, "..", "mixed-tenants.yaml"))
    ap.add_argument("--cluster", default=os.path.join(HERE, "cluster-mixed.yaml"))
    ap.add_argument("--seeds", type=int, default=2, help="workload replications per candidate")
    ap.add_argument("--holdout-seed", type=int, default=9001, help="workload seed of the final check")
    ap.add_argument("--fitness", default=os.path.join(HERE, "fitness-mixed.yaml"))
    a = ap.parse_args()
    cfg = blis_eval.config(cluster=a.cluster, fitness=a.fitness, workload=a.workload, requests="", seeds=a.seeds)
    rnd = random.Random(a.seed)
    base_score, base = evaluate((1.0, 1.0, 1.0), cfg, workdir)
    best = (base_score, (1.0, 1.0, 1.0), base)
    print("trial  load   kv     prefix  primary   goodput  ttft_p99.interactive(ms)")

    def show(i, w, s, r):
        m = r.get("metrics", {})
        print("%-6s %.3f  %.3f  %.3f   %8.4f  %7.3f  %10.1f" % (i, w[0], w[1], w[2], s, m.get("goodput") or 0, m.get("ttft_p99.interactive") or 0))

    show("dflt", (1.0, 1.0, 1.0), base_score, base)
    for i in range(a.trials):
        w = tuple(round(rnd.uniform(0, 2), 3) for _ in range(3))
        if w == (0.0, 0.0, 0.0):
            continue
        s, r = evaluate(w, cfg, workdir)
        show(i + 1, w, s, r)
        if s > best[0]:
            best = (s, w, r)
    # The default and the best on a workload realisation the search never saw.
    with open(a.workload) as f:
        text = f.read()
    held = os.path.join(workdir, "holdout.yaml")
    with open(held, "w") as f:
        f.write(re.sub(r"(?m)^seed: .*$", "seed: %d" % a.holdout_seed, text))
    hcfg = dict(cfg, workload=held, seeds=1)
    hd, rd = evaluate((1.0, 1.0, 1.0), hcfg, workdir)
    hb, rb = evaluate(best[1], hcfg, workdir)
    print()
    print("holdout (workload seed %d):" % a.holdout_seed)
    show("dflt", (1.0, 1.0, 1.0), hd, rd)
    show("best", best[1], hb, rb)
    print()
    print(json.dumps({"default": {"weights": [1.0, 1.0, 1.0], "primary": base_score,
                                  "metrics": {k: base["metrics"].get(k) for k in ("goodput", "ttft_p99.interactive", "slo_attainment")}},
                      "best": {"weights": list(best[1]), "primary": best[0],
                               "metrics": {k: best[2]["metrics"].get(k) for k in ("goodput", "ttft_p99.interactive", "slo_attainment")}}},
                     indent=2))


if __name__ == "__main__":
    main()
