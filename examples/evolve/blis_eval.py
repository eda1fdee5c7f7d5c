"""Run blis-eval on one candidate (standard library only).

A candidate is a policy file: a Starlark routing policy (``.star``, with
``def route(request, cluster)``; wrapped in a one-stage policy bundle), a
policy bundle (YAML: templates, decision trees, Starlark; docs/policies.md),
or a YAML ``router:`` section (appended to the base cluster YAML).
Configuration comes from arguments or the environment: BLIS_EVAL (the
blis-eval binary), BLIS_CLUSTER, BLIS_FITNESS, and BLIS_REQUESTS (a
requests table) or BLIS_WORKLOAD (a blis-synth spec). Nothing is left in
the temporary directory after a call unless BLIS_KEEP_ARTIFACTS=1 (then
each call's tables stay beside its candidate, and blis-eval's JSON names
them): a search calls this thousands of times.
"""

import json
import os
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
INVALID_SCORE = -1e9  # what a search loop ranks an invalid candidate by


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
        "keep_artifacts": os.environ.get("BLIS_KEEP_ARTIFACTS", "") not in ("", "0"),
    }
    c.update({k: v for k, v in over.items() if v is not None})
    return c


def run(candidate_path, cfg=None, workdir=None):
    """Evaluate the candidate; returns blis-eval's JSON object as a dict.

    Raises RuntimeError when blis-eval itself fails (bad usage: exit 2),
    or cannot be run: that is the harness's fault, not the candidate's.
    The files written for the call go to workdir (default: a temporary
    directory, removed unless cfg["keep_artifacts"]).
    """
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
    if cfg["regret_sample"] > 0:
        args += ["--regret-sample", str(cfg["regret_sample"])]
    with open(candidate_path) as f:
        cand = f.read()
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
    try:
        p = subprocess.run(args, capture_output=True, text=True)
    except OSError as e:  # not found, not executable
        raise RuntimeError("cannot run blis-eval (%s): %s; build it with `make build` and set "
                           "BLIS_EVAL=bin/blis-eval, or put it on PATH" % (cfg["blis_eval"], e.strerror or e)) from None
    if p.returncode != 0:
        raise RuntimeError("blis-eval failed (exit %d): %s" % (p.returncode, p.stderr.strip()))
    return json.loads(p.stdout)


def is_router_section(text):
    """A cluster-file fragment (a top-level router: key) rather than a bundle."""
    return any(line.startswith("router:") for line in text.splitlines())


def score(result):
    """The scalar a search maximises: the primary, or INVALID_SCORE."""
    if not result.get("valid") or result.get("primary") is None:
        return INVALID_SCORE
    return float(result["primary"])
