// Package clusterflags holds the flags of a simulated cluster that
// blis-sim and blis-serve share: the cluster YAML and, over it, the keys of
// its only deployment, the router and the seed.
package clusterflags

import (
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/blis-sim/blis/internal/cliutil"
	"github.com/blis-sim/blis/lib/engine/bundle"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/policy"
	"github.com/blis-sim/blis/lib/sim"
)

// Flags returns the shared flags, in help order.
func Flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "cluster", Aliases: []string{"c"}, Usage: "cluster YAML (see examples/clusters/cluster.yaml)"},
		&cli.IntFlag{Name: "replicas", Aliases: []string{"n"}, Usage: "number of replicas", DefaultText: "1"},
		&cli.StringFlag{Name: "model", Usage: "model name", DefaultText: "llama-3.1-8b"},
		&cli.StringFlag{Name: "gpu", Usage: "GPU name", DefaultText: "h100"},
		&cli.IntFlag{Name: "tp", Usage: "tensor-parallel degree per replica", DefaultText: "1"},
		&cli.StringFlag{Name: "weight-dtype", Usage: "weight dtype (default: the model's)"},
		&cli.StringFlag{Name: "kv-dtype", Usage: "KV cache dtype (default: activation dtype)"},
		&cli.StringFlag{Name: "latency", Usage: "latency model: auto, roofline, fitted or linear", DefaultText: "auto"},
		&cli.StringFlag{Name: "coefficients", Usage: "fitted coefficients `FILE`"},
		&cli.StringFlag{Name: "router", Usage: "routing policy: " + strings.Join(policy.Names(policy.StageRouting), ", "), DefaultText: "round-robin"},
		&cli.StringFlag{Name: "seed", Usage: "seed of the random streams: the random and power-of-two routers, and policy-bundle stages that ask for random (random: true), draw from it; nothing else is random, so without them every seed gives the same results", DefaultText: "42"},
		&cli.IntFlag{Name: "max-num-seqs", Usage: "running requests per replica", DefaultText: "vllm serve's for the GPU: 1024 on GPUs of 70 GiB or more but A100 (H100, H200, B200, GB200, RTX PRO 6000), else 256"},
		&cli.IntFlag{Name: "max-num-batched-tokens", Usage: "token budget per step", DefaultText: "vllm serve's for the GPU: 8192 on GPUs of 70 GiB or more but A100 (H100, H200, B200, GB200, RTX PRO 6000), else 2048"},
		&cli.Int64Flag{Name: "kv-blocks", Usage: "KV blocks per replica", DefaultText: "from GPU memory"},
		&cli.BoolFlag{Name: "no-leap", Usage: "take every engine step one at a time instead of leaping over runs of decode-only steps (same results, slower; docs/engine.md)"},
	}
}

// deploymentFlags set a key of the (single) deployment.
var deploymentFlags = []string{"replicas", "model", "gpu", "tp", "weight-dtype", "kv-dtype", "latency", "coefficients",
	"max-num-seqs", "max-num-batched-tokens", "kv-blocks"}

// Config reads --cluster and applies the flags set over it (the duration
// flags horizon, snapshot-interval, kv-event-delay and client-timeout too, where the
// command defines them).
func Config(c *cli.Context) (config.Cluster, error) {
	cfg := config.Default()
	if p := c.String("cluster"); p != "" {
		var err error
		if cfg, err = config.Read(p); err != nil {
			return cfg, cliutil.BadInput(err)
		}
	}
	set := c.IsSet
	// Deployment keys: the flat form's, or the only deployment's.
	for _, f := range deploymentFlags {
		if !set(f) || cfg.IsFlat() {
			continue
		}
		if len(cfg.Deployments) > 1 {
			ids := make([]string, len(cfg.Deployments))
			for i, d := range cfg.Deployments {
				ids[i] = d.ID
			}
			return cfg, cliutil.Usage("--%s: %s has %d deployments (%s): set it per deployment in the file", f, cfg.Name, len(ids), strings.Join(ids, ", "))
		}
		if f == "replicas" && len(cfg.Deployments[0].Pools) > 1 {
			return cfg, cliutil.Usage("--replicas: deployment %s has %d pools: set replicas per pool in %s", cfg.Deployments[0].ID, len(cfg.Deployments[0].Pools), cfg.Name)
		}
	}
	model, gpu, tp, wd, kd := &cfg.Model, &cfg.GPU, &cfg.TP, &cfg.WeightDtype, &cfg.KVDtype
	eng, lat, replicas := &cfg.Engine, &cfg.Latency, &cfg.Replicas
	if !cfg.IsFlat() {
		d := &cfg.Deployments[0]
		model, gpu, tp, wd, kd, eng, lat, replicas = &d.Model, &d.GPU, &d.TP, &d.WeightDtype, &d.KVDtype, &d.Engine, &d.Latency, &d.Pools[0].Replicas
	}
	if set("replicas") {
		*replicas = c.Int("replicas")
	}
	if set("model") {
		*model = c.String("model")
	}
	if set("gpu") {
		*gpu = c.String("gpu")
	}
	if set("tp") {
		*tp = c.Int("tp")
	}
	if set("weight-dtype") {
		*wd = c.String("weight-dtype")
	}
	if set("kv-dtype") {
		*kd = c.String("kv-dtype")
	}
	// A flag that picks the step-time model replaces the YAML's linear β
	// (flags override the YAML); its α still applies to the chosen model.
	if set("latency") {
		lat.Mode = c.String("latency")
		if lat.Mode == "roofline" || lat.Mode == "fitted" {
			lat.Beta = nil
		}
	}
	if set("coefficients") {
		lat.Coefficients = c.String("coefficients")
		lat.Beta = nil
	}
	if set("max-num-seqs") {
		eng.MaxNumSeqs = c.Int("max-num-seqs")
	}
	if set("max-num-batched-tokens") {
		eng.MaxNumBatchedTokens = c.Int("max-num-batched-tokens")
	}
	if set("kv-blocks") {
		eng.KVBlocks = c.Int64("kv-blocks")
	}
	if set("router") {
		cfg.Router.Routing = c.String("router")
	}
	if set("seed") {
		v, err := strconv.ParseUint(c.String("seed"), 10, 64)
		if err != nil {
			return cfg, cliutil.Usage("--seed: expected a non-negative integer, found %q", c.String("seed"))
		}
		cfg.Seed = v
	}
	for _, d := range []struct {
		flag string
		dst  *config.Duration
	}{{"horizon", &cfg.Horizon}, {"snapshot-interval", &cfg.SnapshotInterval}, {"kv-event-delay", &cfg.KVEventDelay}, {"client-timeout", &cfg.ClientTimeout}} {
		if set(d.flag) {
			v, err := config.ParseDuration(c.String(d.flag))
			if err != nil {
				return cfg, cliutil.Usage("--%s: %v", d.flag, err)
			}
			*d.dst = v
		}
	}
	// The config is validated once, with the flags over the file.
	if err := cfg.Validate(); err != nil {
		return cfg, cliutil.BadInput(err)
	}
	return cfg, nil
}

// PolicyFlag is --policy: a policy bundle over the cluster YAML's policy key.
func PolicyFlag() cli.Flag {
	return &cli.StringFlag{Name: "policy", Usage: "policy bundle `FILE` (YAML; overrides the cluster YAML's policy key; see docs/policies.md)"}
}

// Setup is the simulated cluster the flags describe, as every tool sets it
// up (lib/sim): the config (Config), the policy bundle of --policy or of
// the config's policy key, latency models and policies.
func Setup(c *cli.Context) (*sim.Setup, error) {
	cfg, err := Config(c)
	if err != nil {
		return nil, err
	}
	var b *bundle.Bundle
	if p := c.String("policy"); p != "" {
		if b, err = bundle.Load(p, bundle.Env{}); err != nil {
			return nil, cliutil.BadInput(err)
		}
	}
	s, err := sim.New(cfg, b)
	if err != nil {
		return nil, cliutil.BadInput(err)
	}
	s.NoLeap = c.Bool("no-leap")
	return s, nil
}
