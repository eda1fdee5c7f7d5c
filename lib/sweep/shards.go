package sweep

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Running shards elsewhere: a Slurm job array (one task per shard) or a
// Kubernetes Indexed Job (one pod per index). Each task runs
// `blis-sweep --shard-count N` with its index from the scheduler's
// environment and writes run records into the shared output directory;
// `blis-sweep --collect` merges them. A shard that failed leaves its runs
// without records, and only the shards still missing runs are submitted
// again.

// DefaultShards is the shard count when none is given: one per run up to 32.
func DefaultShards(runs int) int { return max(1, min(runs, 32)) }

// ArraySpec writes shard indices as a Slurm --array value: 0-3,7,9-10.
func ArraySpec(idx []int) string {
	var parts []string
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(idx[i]))
		} else {
			parts = append(parts, strconv.Itoa(idx[i])+"-"+strconv.Itoa(idx[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '_' || r == '-' || r == ':' || r == '=' || r == ',' || r == '+' ||
			r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// SlurmJob is a job array running the missing shards of a sweep.
type SlurmJob struct {
	Name   string   // the sweep's name
	Exec   string   // shell words that run blis-sweep on the nodes
	Spec   string   // the spec, an absolute path
	Out    string   // the output directory, an absolute path
	Shards int      // shard count
	Tasks  []int    // the shards to run (array indices)
	Args   []string // extra sbatch arguments
}

// Script is the batch script: one array task per shard.
func (j *SlurmJob) Script() string {
	var b strings.Builder
	b.WriteString("#!/bin/bash\n")
	fmt.Fprintf(&b, "#SBATCH --job-name=%s\n", "blis-sweep-"+j.Name)
	fmt.Fprintf(&b, "#SBATCH --array=%s\n", ArraySpec(j.Tasks))
	fmt.Fprintf(&b, "#SBATCH --output=%s\n", filepath.Join(j.Out, "slurm", "%A_%a.log"))
	fmt.Fprintf(&b, "# Written by blis-sweep: array task I runs shard I of %d (run k of the plan is in\n", j.Shards)
	fmt.Fprintf(&b, "# shard k mod %d), writing one record per run under %s/runs.\n", j.Shards, j.Out)
	fmt.Fprintf(&b, "# Merge with: blis-sweep --collect --out %s %s\n", shellQuote(j.Out), shellQuote(j.Spec))
	fmt.Fprintf(&b, "exec %s -q --out %s --shard-count %d --shard-index \"$SLURM_ARRAY_TASK_ID\" %s\n",
		j.Exec, shellQuote(j.Out), j.Shards, shellQuote(j.Spec))
	return b.String()
}

// Submit writes the script under Out/slurm and submits it with sbatch
// (blocking until the array ends with wait). It returns sbatch's job id;
// with wait, a non-nil error also when a task failed (the records of the
// other tasks are kept).
func (j *SlurmJob) Submit(wait bool) (string, error) {
	if len(j.Tasks) == 0 {
		return "", errors.New("no shard to submit")
	}
	dir := filepath.Join(j.Out, "slurm")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := writeFileAtomic(filepath.Join(dir, "shards"), []byte(strconv.Itoa(j.Shards)+"\n")); err != nil {
		return "", err
	}
	script := filepath.Join(dir, "sweep.sbatch")
	if err := writeFileAtomic(script, []byte(j.Script())); err != nil {
		return "", err
	}
	args := []string{"--parsable"}
	if wait {
		args = append(args, "--wait")
	}
	args = append(args, j.Args...)
	args = append(args, script)
	cmd := exec.Command("sbatch", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	id := strings.TrimSpace(stdout.String())
	if i := strings.IndexByte(id, ';'); i >= 0 {
		id = id[:i] // "jobid;cluster"
	}
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && id != "" && wait {
			return id, fmt.Errorf("sbatch --wait: job %s: a task failed (%v): see %s", id, strings.TrimSpace(stderr.String()), filepath.Join(dir, id+"_*.log"))
		}
		msg := strings.TrimSpace(stderr.String())
		if errors.Is(err, exec.ErrNotFound) {
			msg = "sbatch is not on PATH (is this a Slurm login node?)"
		}
		return id, fmt.Errorf("sbatch: %v: %s", err, msg)
	}
	return id, nil
}

// SlurmShards is the shard count of the last submission to out (0 if none).
func SlurmShards(out string) int {
	b, err := os.ReadFile(filepath.Join(out, "slurm", "shards"))
	if err != nil {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 1 {
		return 0
	}
	return n
}

// K8sJob is a Kubernetes Indexed Job running every shard of a sweep.
type K8sJob struct {
	Name        string
	Image       string
	Exec        string // the command in the image (blis-sweep)
	PVC         string // the claim holding the spec, its inputs and the output
	Mount       string // where the claim is mounted
	Spec, Out   string // paths in the container
	Shards      int
	Parallelism int
}

// Manifest is the Job as YAML: completions = shards, completionMode
// Indexed (the pod's index is $JOB_COMPLETION_INDEX, which blis-sweep reads
// as its shard index), a failed index retried on its own.
func (j *K8sJob) Manifest() string {
	// The Job's name: a DNS label short enough for the pods' names the
	// Job controller derives from it; the label value names the sweep
	// within the API server's 63 characters (a longer sweep name was
	// rejected).
	name := k8sName("blis-sweep-"+j.Name, 52)
	label := k8sName(j.Name, 63)
	q := strconv.Quote
	var cmd []string
	for _, w := range strings.Fields(j.Exec) {
		cmd = append(cmd, q(w))
	}
	cmd = append(cmd, q("-q"), q("--out"), q(j.Out), q("--shard-count"), q(strconv.Itoa(j.Shards)), q(j.Spec))
	var b strings.Builder
	fmt.Fprintf(&b, `# Kubernetes Indexed Job for sweep %s, written by blis-sweep --k8s-job.
# Pod I runs shard I of %d: run k of the plan is in shard k mod %d, and
# blis-sweep reads I from $JOB_COMPLETION_INDEX. Each run's record goes to
# %s/runs on the volume of claim %s,
# which must hold the spec and the files it names at the paths below.
#   kubectl apply -f job.yaml
#   kubectl wait --for=condition=complete --timeout=24h job/%s
#   blis-sweep --collect --out %s %s   # where the volume is mounted
apiVersion: batch/v1
kind: Job
metadata:
  name: %s
  labels: {app: blis-sweep, sweep: %s}
spec:
  completionMode: Indexed
  completions: %d
  parallelism: %d
  backoffLimitPerIndex: 2
  maxFailedIndexes: %d
  template:
    metadata:
      labels: {app: blis-sweep, sweep: %s}
    spec:
      restartPolicy: Never
      containers:
        - name: blis-sweep
          image: %s
          command: [%s]
          volumeMounts:
            - {name: work, mountPath: %s}
      volumes:
        - name: work
          persistentVolumeClaim: {claimName: %s}
`, j.Name, j.Shards, j.Shards, j.Out, j.PVC, name, j.Out, j.Spec,
		name, q(label), j.Shards, max(1, j.Parallelism), j.Shards, q(label), q(j.Image), strings.Join(cmd, ", "), q(j.Mount), q(j.PVC))
	return b.String()
}

// k8sName makes s a Kubernetes name of at most n characters that is both a
// DNS label (RFC 1123: lower-case letters, digits and '-', starting and
// ending with a letter or digit) and a valid label value. A longer s is
// cut and ends with 8 hex digits of its SHA-256, so that two long names
// that share a prefix stay apart.
func k8sName(s string, n int) string {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(s))
	name = strings.Trim(name, "-")
	if len(name) > n {
		sum := sha256.Sum256([]byte(s))
		name = strings.TrimRight(name[:n-9], "-") + "-" + hex.EncodeToString(sum[:4])
	}
	if name == "" {
		name = "sweep"
	}
	return name
}
