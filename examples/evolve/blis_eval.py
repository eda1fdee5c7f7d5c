"""Run blis-eval on one candidate (standard library only).

A candidate is a policy file: a Starlark routing policy (``.star``, with
``def route(request, cluster)``; wrapped in a one-stage policy bundle), a
policy bundle (YAML: templates, decision trees, Starlark; docs/policies.md),
or a YAML ``router:`` section (appended to the base cluster YAML).
Configuration comes from arguments or the environment: BLIS_EVAL (the
blis-eval binary), BLIS_CLUSTER, BLIS_FITNESS, and BLIS_REQUESTS (a
requests table) or BLIS_WORKLOAD (a blis-synth spec); the evaluation's
budgets BLIS_TIMEOUT (wall clock, default 120s) and BLIS_MAX_RUN_STEPS
(Starlark steps of a whole run, default 500000000). Nothing is left in
the temporary directory after a call unless BLIS_KEEP_ARTIFACTS=1 (then
each call's tables stay beside its candidate, and blis-eval's JSON names
them): a search calls this thousands of times.

A search loop must not stop on one candidate: every failure comes back as
a result with "valid": false and an "error" (the candidate's own, or, with
"harness_error": true, the harness's: blis-eval missing, failing, or
killed past its budget), never as an exception.
"""

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
INVALID_SCORE = -1e9  # what a search loop ranks an invalid candidate by
# blis-eval stops a run at --timeout; the process is killed only if it
# outlives that by this much (a hung machine, a bug).
KILL_GRACE_S = 30


def config(**over):
    """The evaluation setup, from the environment and keyword overrides."""
    c = {
        "blis_eval": os.environ.get("BLIS_EVAL", "blis-eval"),
        "cluster": os.environ.get("BLIS_CLUSTER", os.path.join(HERE, "cluster.yaml")),
        "fitness": os.environ.get("BLIS_FITNESS", os.path.join(HERE, "fitness.yaml")),
        "requests": os.environ.get("BLIS_REQUESTS", ""),
        "workload": os.environ.get("BLIS_WORKLOAD", os.path.join(HERE, "workload.yaml")),
        "seeds": int(os.environ.get("BLIS_SEEDS", "1")),
        "regret_sample": float(os.environ.get("BLIS_REGRET_SAMPLE", "0")),
        "strategy": os.environ.get("BLIS_SUMMARY_STRATEGY", "issue_focused"),
        "timeout": os.environ.get("BLIS_TIMEOUT", "120s"),
        "max_run_steps": int(os.environ.get("BLIS_MAX_RUN_STEPS", "500000000")),
        "keep_artifacts": os.environ.get("BLIS_KEEP_ARTIFACTS", "") not in ("", "0"),
    }
    c.update({k: v for k, v in over.items() if v is not None})
    return c


def seconds(d):
    """A Go duration such as 90s, 2m or 1m30s, in seconds."""
    total, num = 0.0, ""
    units = {"h": 3600, "m": 60, "s": 1, "ms": 1e-3}
    i = 0
    while i < len(d):
        c = d[i]
        if c.isdigit() or c == ".":
            num += c
            i += 1
            continue
        u = "ms" if d[i:i + 2] == "ms" else c
        total += float(num) * units[u]
        num, i = "", i + len(u)
    return total + (float(num) if num else 0)


def failed(msg):
    """A result for a candidate the harness could not evaluate."""
    print("blis_eval: " + msg, file=sys.stderr)
    return {"valid": False, "error": msg, "harness_error": True, "primary": None, "metrics": {}, "summary": ""}


def run(candidate_path, cfg=None, workdir=None):
    """Evaluate the candidate; returns blis-eval's JSON object as a dict,
    or a result with "valid": False and "harness_error": True when
    blis-eval could not run (missing, bad usage, killed past its budget).
    The files written for the call go to workdir (default: a temporary
    directory, removed unless cfg["keep_artifacts"])."""
    cfg = cfg or config()
    if workdir is None:
        if cfg["keep_artifacts"]:
            workdir = tempfile.mkdtemp(prefix="blis-evolve-")
        else:
            with tempfile.TemporaryDirectory(prefix="blis-evolve-") as d:
                return run(candidate_path, cfg, d)
    args = [cfg["blis_eval"], "--fitness", cfg["fitness"], "--seeds", str(cfg["seeds"]),
            "--summary-strategy", cfg["strategy"]]
    if cfg["keep_artifacts"]:
        args += ["--artifacts", os.path.join(workdir, "artifacts")]
    if cfg["timeout"]:
        args += ["--timeout", cfg["timeout"]]
    if cfg["max_run_steps"]:
        args += ["--max-run-steps", str(cfg["max_run_steps"])]
    if cfg["regret_sample"] > 0:
        args += ["--regret-sample", str(cfg["regret_sample"])]
    try:
        with open(candidate_path) as f:
            cand = f.read()
    except OSError as e:
        return failed("candidate %s: %s" % (candidate_path, e.strerror))
    if candidate_path.endswith(".star"):
        bundle = os.path.join(workdir, "candidate.bundle.yaml")
        with open(bundle, "w") as f:
            f.write("id: %s\nrouting: {kind: starlark, file: %s}\n"
                    % (os.path.basename(candidate_path), json.dumps(os.path.abspath(candidate_path))))
        args += ["--cluster", cfg["cluster"], "--policy", bundle]
    elif not is_router_section(cand):
        args += ["--cluster", cfg["cluster"], "--policy", candidate_path]
    else:
        with open(cfg["cluster"]) as f:
            base = f.read()
        cluster = os.path.join(workdir, "cluster.yaml")
        with open(cluster, "w") as f:
            f.write(base.rstrip("\n") + "\n" + cand)
        args += ["--cluster", cluster]
    if cfg["requests"]:
        args.append(cfg["requests"])
    else:
        args += ["--workload", cfg["workload"]]
    kill = seconds(cfg["timeout"]) + KILL_GRACE_S if cfg["timeout"] else None
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=kill)
    except FileNotFoundError:
        return failed("blis-eval not found (%s): build it with make build and put bin/ on PATH, or set BLIS_EVAL" % cfg["blis_eval"])
    except PermissionError:
        return failed("blis-eval (%s) is not executable" % cfg["blis_eval"])
    except subprocess.TimeoutExpired:
        return failed("blis-eval did not stop within %g s of its --timeout %s: killed" % (KILL_GRACE_S, cfg["timeout"]))
    if p.returncode != 0:
        return failed("blis-eval failed (exit %d): %s" % (p.returncode, p.stderr.strip()))
    try:
        return json.loads(p.stdout)
    except ValueError:
        return failed("blis-eval printed no JSON object: %s" % p.stdout[:200])


def is_router_section(text):
    """A cluster-file fragment (a top-level router: key) rather than a bundle."""
    return any(line.startswith("router:") for line in text.splitlines())


def score(result):
    """The scalar a search maximises: the primary, or INVALID_SCORE."""
    if not result.get("valid") or result.get("primary") is None:
        return INVALID_SCORE
    return float(result["primary"])
