package report

import (
	"fmt"
	"strings"

	"github.com/blis-sim/blis/lib/trace"
)

// configTables are the report's first tables: what produced each run, read
// from its metadata (blis-sim's blis.sim.deployments and blis.sim.router,
// and the provenance chain), and the measured error of each deployment's
// latency model (KnownErrors).
func (rep *Report) configTables() {
	// A policy column when a policy bundle made some run's decisions: two
	// runs that differ only in their bundle must not look alike.
	withPolicy := false
	for _, r := range rep.runs {
		withPolicy = withPolicy || r.meta.PolicyLabel() != ""
	}
	cols := []string{"deployment", "model", "gpu", "tp", "replicas", "router", "latency", "kv_blocks", "tool", "seed"}
	note := "from the results' metadata: blis.sim.deployments, blis.sim.router and the blis-sim (or blis-load) stage of blis.provenance; latency = the step-time model (roofline, or fitted: the coefficients file)"
	if withPolicy {
		cols = append(cols[:6], append([]string{"policy"}, cols[6:]...)...)
		note += "; policy = the policy bundle's id, generation and stages (blis.policy.*), and router its routing stage when it has one"
	}
	cfg := &Table{Name: "config", Title: "Run configuration", Header: true, Note: note, Columns: rep.runCol(cols...)}
	known := &Table{Name: "known_error", Title: "Known error of the latency model", Header: true,
		Note: "median absolute error of TTFT and TPOT against real runs, in %, with the median signed error (bias; negative = the simulator is too fast), " +
			"per load regime, for the latency model and GPU family of each deployment; from " + KnownErrorSource,
		Columns: rep.runCol("deployment", "latency", "gpu_family", "load_regime", "points", "ttft_err_pct", "ttft_bias_pct", "tpot_err_pct", "tpot_bias_pct")}
	for i, r := range rep.runs {
		tool, seed := "-", "-"
		if p := r.meta.Provenance; len(p) > 0 {
			last := &p[len(p)-1]
			if pr := producer(p); pr != nil {
				last = pr
			}
			tool = last.Tool + " " + last.Version
			if last.Seed != nil {
				seed = fmt.Sprint(*last.Seed)
			}
		}
		deps, err := r.meta.SimDeployments()
		if err != nil {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: %v", r.path, err))
		}
		if deps == nil {
			deps = simModelDeployments(r.meta.Get("blis.sim.model"))
		}
		router := r.meta.RouterLabel()
		if router == "" {
			router = "-"
		}
		// A policy bundle that read the true output lengths (oracle: true;
		// lib/engine/bundle.MetaOracle) learned what no real router knows.
		if r.meta.Get("blis.policy.oracle") == "true" {
			router += " (oracle)"
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: ORACLE: policy bundle %q read the true output lengths (oracle: true); a real router has predictions at best, so this run overstates what its policy achieves deployed",
				r.path, r.meta.Get("blis.policy.id")))
		}
		// row puts the policy cell after the router's when there is a
		// policy column.
		row := func(c ...Cell) []Cell {
			if withPolicy {
				pol := r.meta.PolicyLabel()
				if pol == "" {
					pol = "-"
				}
				c = append(c[:6], append([]Cell{txt(pol)}, c[6:]...)...)
			}
			return rep.runCell(i, c...)
		}
		if len(deps) == 0 {
			what := "not simulated, or written without blis-sim's metadata"
			if tool != "-" {
				what = "written by " + tool + ": no simulated cluster"
			}
			cfg.add(row(txt("-"), txt(what), txt("-"), num(nan, 0), num(nan, 0), txt(router), txt("-"), num(nan, 0), txt(tool), txt(seed))...)
			continue
		}
		for _, d := range deps {
			cfg.add(row(txt(d.ID), txt(d.Model), txt(d.GPU), intOrNaN(int64(d.TP)), intOrNaN(int64(d.Replicas)), txt(router),
				txt(d.Latency), intOrNaN(d.KVBlocks), txt(tool), txt(seed))...)
			ke := KnownErrorsFor(d.Latency, d.GPU)
			if len(ke) == 0 {
				fam := GPUFamily(d.GPU)
				if fam == "" {
					fam = "-"
				}
				known.add(rep.runCell(i, txt(d.ID), txt(d.Latency), txt(fam), txt("no measurement of this model on this GPU family"),
					num(nan, 0), num(nan, 0), num(nan, 0), num(nan, 0), num(nan, 0))...)
				continue
			}
			for _, k := range ke {
				known.add(rep.runCell(i, txt(d.ID), txt(d.Latency), txt(k.GPUFamily), txt(k.Regime), integer(int64(k.Points)),
					integer(int64(k.TTFT)), integer(int64(k.TTFTBias)), integer(int64(k.TPOT)), integer(int64(k.TPOTBias)))...)
			}
		}
	}
	rep.Tables = append(rep.Tables, cfg)
	if len(known.Rows) > 0 {
		rep.Tables = append(rep.Tables, known)
	}
}

// producer is the stage that made a run's results — simulated (blis-sim,
// blis-serve, blis-eval) or measured (blis-load) — not a tool that copied
// them (blis-convert changing the format); nil when none did.
func producer(p []trace.Stage) *trace.Stage {
	for j := len(p) - 1; j >= 0; j-- {
		switch p[j].Tool {
		case "blis-sim", "blis-load", "blis-serve", "blis-eval":
			return &p[j]
		}
	}
	return nil
}

var nan = func() float64 { var z float64; return z / z }()

func intOrNaN(v int64) Cell {
	if v == 0 {
		return num(nan, 0)
	}
	return integer(v)
}

// simModelDeployments reads the older blis.sim.model key (latency model
// names joined by commas): a roofline's name carries model, GPU and TP.
func simModelDeployments(v string) []trace.SimDeployment {
	if v == "" {
		return nil
	}
	var out []trace.SimDeployment
	for _, name := range strings.Split(v, ",") {
		d := trace.SimDeployment{ID: "-", Model: "-", GPU: "-", Latency: name}
		if k, rest, _ := strings.Cut(name, ":"); k == "roofline" {
			if f := strings.Split(rest, "/"); len(f) == 3 {
				d.Model, d.GPU = f[0], f[1]
				fmt.Sscanf(f[2], "tp%d", &d.TP)
			}
		}
		out = append(out, d)
	}
	return out
}
