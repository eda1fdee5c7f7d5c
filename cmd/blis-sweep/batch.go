package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/blis-sim/blis/internal/cliutil"
	"github.com/blis-sim/blis/lib/report"
	"github.com/blis-sim/blis/lib/sweep"
)

// shardCount is --shards, else the count of the last submission to out,
// else one shard per run up to 32.
func shardCount(c *cli.Context, plan *sweep.Plan, out string) (int, error) {
	if c.IsSet("shards") {
		n := c.Int("shards")
		if n < 1 {
			return 0, cliutil.Usage("--shards: expected >= 1, found %d", n)
		}
		return n, nil
	}
	if n := sweep.SlurmShards(out); n > 0 {
		return n, nil
	}
	return sweep.DefaultShards(len(plan.Runs)), nil
}

// slurm submits the shards that still miss runs as a job array.
func slurm(c *cli.Context, plan *sweep.Plan, specPath, out string, f report.Format) error {
	stderr := c.App.ErrWriter
	n, err := shardCount(c, plan, out)
	if err != nil {
		return err
	}
	missing, shards := sweep.Missing(plan, out, n)
	if len(missing) == 0 {
		fmt.Fprintf(stderr, "blis-sweep: every run of %s is done: nothing to submit\n", plan.Spec.Name)
		return collect(c, plan, out, f, n)
	}
	spec, err := filepath.Abs(specPath)
	if err != nil {
		return err
	}
	absOut, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	execCmd := c.String("exec")
	if execCmd == "" {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("finding this binary for the job script: %w (give --exec)", err)
		}
		execCmd = shellWord(self)
	}
	job := &sweep.SlurmJob{Name: plan.Spec.Name, Exec: execCmd, Spec: spec, Out: absOut, Shards: n, Tasks: shards,
		Args: c.StringSlice("sbatch-arg")}
	wait := c.Bool("wait")
	id, err := job.Submit(wait)
	if id != "" {
		fmt.Fprintf(stderr, "blis-sweep: submitted job %s: shards %s of %d (%d of %d runs to do); script %s\n",
			id, sweep.ArraySpec(shards), n, len(missing), len(plan.Runs), filepath.Join(absOut, "slurm", "sweep.sbatch"))
	}
	if !wait {
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "blis-sweep: when it is done: blis-sweep --collect --out %s %s\n", shellWord(out), shellWord(specPath))
		return nil
	}
	if err != nil {
		fmt.Fprintf(stderr, "blis-sweep: %v\n", err)
	}
	// Collect what the array left: the summary when complete, else the
	// shards to submit again.
	return collect(c, plan, out, f, n)
}

// k8sJob prints the Indexed Job manifest.
func k8sJob(c *cli.Context, plan *sweep.Plan, specPath, out string) error {
	n, err := shardCount(c, plan, out)
	if err != nil {
		return err
	}
	mount := c.String("mount")
	if !filepath.IsAbs(mount) {
		return cliutil.Usage("--mount: expected an absolute path in the container, found %q", mount)
	}
	// Paths relative to the current directory are where the volume holds
	// them: the volume is a copy of this directory.
	inPod := func(p string) (string, error) {
		if filepath.IsAbs(p) {
			return p, nil
		}
		cl := filepath.Clean(p)
		if strings.HasPrefix(cl, "..") {
			return "", cliutil.Usage("--k8s-job: %s is outside the current directory, which the volume holds: give paths inside it (or absolute paths as the pod sees them)", p)
		}
		return filepath.ToSlash(filepath.Join(mount, cl)), nil
	}
	spec, err := inPod(specPath)
	if err != nil {
		return err
	}
	o, err := inPod(out)
	if err != nil {
		return err
	}
	execCmd := c.String("exec")
	if execCmd == "" {
		execCmd = "blis-sweep"
	}
	j := &sweep.K8sJob{Name: plan.Spec.Name, Image: c.String("image"), Exec: execCmd, PVC: c.String("pvc"), Mount: mount,
		Spec: spec, Out: o, Shards: n, Parallelism: n}
	_, err = fmt.Fprint(c.App.Writer, j.Manifest())
	return err
}

// shellWord quotes a path for the job script.
func shellWord(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`;&|<>(){}*?[]#~!") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
