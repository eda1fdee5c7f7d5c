package infperf

import (
	"fmt"
	"math"

	"github.com/blis-sim/blis/lib/rng"
	"github.com/blis-sim/blis/lib/trace"
)

// resolve checks the config and resolves what generation needs: every key
// that changes the requests is honoured, refused with its line, or
// approximated with a note.
func (c *Config) resolve(opts Options) (*plan, error) {
	p := &plan{reqType: trace.TypeCompletion, interval: 1, timeoutUS: DefaultTimeoutS * 1_000_000}
	note := func(format string, args ...any) { p.notes = append(p.notes, fmt.Sprintf(format, args...)) }
	if opts.InputScale < 0 || math.IsNaN(opts.InputScale) || math.IsInf(opts.InputScale, 0) {
		return nil, fmt.Errorf("input scale: expected a positive factor, found %g", opts.InputScale)
	}

	// api:
	if a := c.API; a != nil {
		switch a.Type {
		case "", "completion":
		case "chat":
			p.reqType = trace.TypeChat
			note("api.type chat: the prompt lengths are the generated text's; the chat template adds a few tokens per request, not counted")
		default:
			return nil, c.errAt("api.type", "expected completion or chat, found %q", a.Type)
		}
		p.streaming = a.Streaming != nil && *a.Streaming
		if set(a.ResponseFormat) {
			note("api.response_format: structured output constrains decoding on the server; not modelled (tokens cost what unconstrained ones do)")
		}
	}
	if s := c.Server; s != nil && s.IgnoreEOS != nil && !*s.IgnoreEOS {
		note("server.ignore_eos false: output_tokens are the requested max_tokens; the model may stop sooner")
	}

	// data:
	d := c.Data
	if d == nil || d.Type == "" || d.Type == "mock" {
		return nil, c.errAt("data.type", "the mock data generator sends placeholder prompts of no set length: use shared_prefix, random or synthetic")
	}
	for _, k := range []struct {
		path string
		v    any
		why  string
	}{
		{"data.multimodal", d.Multimodal, "images, video and audio are not modelled by this reader"},
		{"data.trace", d.Trace, "the lengths come from a trace file: convert the trace with blis-convert instead"},
		{"data.otel_trace_replay", d.OTelTraceReplay, "replays recorded sessions: convert the trace with blis-convert instead"},
		{"data.weka_trace_replay", d.WekaTraceReplay, "replays recorded sessions: convert the trace with blis-convert (format weka) instead"},
		{"data.conversation_replay", d.ConversationReplay, "conversation replay is not read"},
		{"data.visionarena", d.VisionArena, "a dataset of images and chats: not read"},
	} {
		if set(k.v) {
			return nil, c.errAt(k.path, "%s", k.why)
		}
	}
	p.kind = d.Type
	switch d.Type {
	case "shared_prefix":
		if err := c.resolveSharedPrefix(p, note); err != nil {
			return nil, err
		}
	case "random", "synthetic":
		if d.SharedPrefix != nil {
			return nil, c.errAt("data.shared_prefix", "set, but data.type is %s", d.Type)
		}
		for _, x := range []struct {
			path string
			d    *Distribution
			out  *[]int
		}{{"data.input_distribution", d.InputDistribution, &p.inLens}, {"data.output_distribution", d.OutputDistribution, &p.outLens}} {
			if x.d == nil {
				return nil, c.errAt(x.path, "required by data.type %s", d.Type)
			}
			if x.d.TotalCount == nil || *x.d.TotalCount <= 0 {
				return nil, c.errAt(x.path+".total_count", "required by data.type %s: the number of lengths drawn, one per request of a stage", d.Type)
			}
			ld, err := c.dist(x.path, x.d, true)
			if err != nil {
				return nil, err
			}
			// Drawn once, before the first request, in this order.
			*x.out = ld.sample(rng.New(seedOf(opts, c), "inference-perf/"+x.path), *x.d.TotalCount)
		}
		if d.Type == "synthetic" {
			note("data.type synthetic: prompts are slices of a text corpus at random offsets; taken as sharing no prefix")
		}
	case "shareGPT", "cnn_dailymail", "infinity_instruct", "billsum_conversations":
		return nil, c.errAt("data.type", "%s takes its prompts from a dataset: convert the dataset's lengths with blis-convert instead", d.Type)
	default:
		return nil, c.errAt("data.type", "expected shared_prefix, random or synthetic, found %q", d.Type)
	}

	// load:
	l := c.Load
	if l != nil && set(l.Sweep) {
		return nil, c.errAt("load.sweep", "the stages' rates come from a probe of the real server's saturation at run time: write the stages out")
	}
	if l == nil || len(l.Stages) == 0 {
		return nil, c.errAt("load.stages", "required: at least one stage")
	}
	p.loadType = l.Type
	switch l.Type {
	case "", "constant":
		p.loadType = "constant"
	case "poisson", "concurrent":
	case "trace_replay", "trace_session_replay":
		return nil, c.errAt("load.type", "%s replays a trace's timing: convert the trace with blis-convert instead", l.Type)
	default:
		return nil, c.errAt("load.type", "expected constant, poisson or concurrent, found %q", l.Type)
	}
	if set(l.Trace) {
		return nil, c.errAt("load.trace", "a trace's timing: convert the trace with blis-convert instead")
	}
	for i, st := range l.Stages {
		at := fmt.Sprintf("load.stages[%d]", i)
		for _, k := range []struct {
			name string
			v    any
		}{{"concurrent_sessions", st.ConcurrentSessions}, {"session_rate", st.SessionRate}, {"num_sessions", st.NumSessions}, {"timeout", st.Timeout}} {
			if set(k.v) {
				return nil, c.errAt(at+"."+k.name, "a trace_session_replay stage key")
			}
		}
		if p.loadType == "concurrent" {
			if st.NumRequests == nil || *st.NumRequests <= 0 {
				return nil, c.errAt(at+".num_requests", "required by load.type concurrent: a positive integer")
			}
			if st.ConcurrencyLevel == nil || *st.ConcurrencyLevel <= 0 {
				return nil, c.errAt(at+".concurrency_level", "required by load.type concurrent: a positive integer")
			}
			if i > 0 {
				return nil, c.errAt(at, "inference-perf starts a concurrent stage when the one before has drained, a time only the simulation knows, and each stage has its own concurrency: write one config per stage")
			}
			continue
		}
		if st.NumRequests != nil || st.ConcurrencyLevel != nil {
			return nil, c.errAt(at, "num_requests and concurrency_level belong to load.type concurrent")
		}
		if st.Rate == nil || !(*st.Rate > 0) {
			return nil, c.errAt(at+".rate", "required: a positive request rate (req/s)")
		}
		if st.Duration == nil || !(*st.Duration > 0) {
			return nil, c.errAt(at+".duration", "required: a positive duration (s)")
		}
		if n := *st.Rate * *st.Duration; n < 1 || n > 1e8 {
			return nil, c.errAt(at, "rate × duration = %g requests: expected 1 to 10⁸", n)
		}
	}
	p.stages = l.Stages
	if l.Interval != nil {
		if *l.Interval < 0 {
			return nil, c.errAt("load.interval", "expected >= 0 s, found %g", *l.Interval)
		}
		p.interval = *l.Interval
	}
	if len(l.Stages) > 1 {
		note("load.stages: inference-perf starts a stage when every request of the one before has ended (then load.interval, %g s, and a 1 s head start); the table starts it %g s after the previous stage's last send, as if that stage drained at once", p.interval, p.interval+1)
	}
	workers := 0
	if l.NumWorkers != nil {
		if *l.NumWorkers <= 0 {
			return nil, c.errAt("load.num_workers", "expected a positive integer, found %d", *l.NumWorkers)
		}
		workers = *l.NumWorkers
	}
	perWorker := 100
	if l.WorkerMaxConcurrency != nil {
		if *l.WorkerMaxConcurrency <= 0 {
			return nil, c.errAt("load.worker_max_concurrency", "expected a positive integer, found %d", *l.WorkerMaxConcurrency)
		}
		perWorker = *l.WorkerMaxConcurrency
	}
	switch {
	case p.loadType == "concurrent":
		p.maxInFlight = *l.Stages[0].ConcurrencyLevel
		if workers > 0 {
			p.maxInFlight = min(p.maxInFlight, workers*perWorker)
		}
	case workers > 0:
		// A worker holds a slot from taking a request off the queue to its
		// end (waiting for its send time too): close to workers ×
		// worker_max_concurrency requests in flight.
		p.maxInFlight = workers * perWorker
	default:
		note("load.num_workers not set: inference-perf starts one worker per CPU of the benchmarking machine (each with %d requests in flight at most); the table sets no cap", perWorker)
	}
	if l.RequestTimeout != nil {
		if !(*l.RequestTimeout > 0) {
			return nil, c.errAt("load.request_timeout", "expected a positive number of seconds, found %g", *l.RequestTimeout)
		}
		p.timeoutUS = int64(math.Round(*l.RequestTimeout * 1e6))
	} else {
		note("load.request_timeout not set: requests time out after aiohttp's default %d s, as inference-perf's do", DefaultTimeoutS)
	}
	if set(l.CircuitBreakers) || set(c.CircuitBreakers) {
		note("circuit_breakers: a breaker ends a stage early on the real server's errors; not modelled (every request is in the table)")
	}
	if set(l.LoRATrafficSplit) {
		note("load.lora_traffic_split: LoRA adapters are not modelled; every request goes to the base model")
	}
	p.seed = seedOf(opts, c)
	return p, nil
}

// seedOf mixes the config's own seeds into the caller's.
func seedOf(opts Options, c *Config) uint64 {
	s := opts.Seed
	if c.Load != nil && c.Load.BaseSeed != nil {
		s = rng.Mix64(s ^ *c.Load.BaseSeed)
	}
	if c.Data != nil && c.Data.SharedPrefix != nil && c.Data.SharedPrefix.Seed != nil {
		s = rng.Mix64(s ^ *c.Data.SharedPrefix.Seed ^ 0x5f)
	}
	return s
}

func (c *Config) resolveSharedPrefix(p *plan, note func(string, ...any)) error {
	sp := c.Data.SharedPrefix
	if sp == nil {
		sp = &SharedPrefix{}
	}
	if c.Data.InputDistribution != nil || c.Data.OutputDistribution != nil {
		return c.errAt("data.input_distribution", "not read by data.type shared_prefix: give data.shared_prefix.question_len and output_len")
	}
	count := func(a, b *int, an, bn string, def int) (int, error) {
		if a != nil && b != nil {
			return 0, c.errAt("data.shared_prefix."+bn, "%s and %s are the same setting: give one", an, bn)
		}
		v, k := def, an
		if a != nil {
			v = *a
		} else if b != nil {
			v, k = *b, bn
		}
		if v <= 0 || v > 1<<20 {
			return 0, c.errAt("data.shared_prefix."+k, "expected 1 to 1048576, found %d", v)
		}
		return v, nil
	}
	var err error
	s := &p.sp
	if s.groups, err = count(sp.NumGroups, sp.NumUniqueSystemPrompts, "num_groups", "num_unique_system_prompts", 10); err != nil {
		return err
	}
	if s.perGroup, err = count(sp.NumPromptsPerGroup, sp.NumUsersPerSystemPrompt, "num_prompts_per_group", "num_users_per_system_prompt", 10); err != nil {
		return err
	}
	if s.groups*s.perGroup > 1<<20 {
		return c.errAt("data.shared_prefix", "%d × %d prompts: more than 1048576", s.groups, s.perGroup)
	}
	length := func(name string, l *Length, legacy *Distribution, legacyName string, def int) (lengthDist, error) {
		at := "data.shared_prefix." + name
		switch {
		case l != nil && l.fixed == nil && legacy != nil:
			return lengthDist{}, c.errAt("data.shared_prefix."+legacyName, "%s is a distribution already: give one of the two", name)
		case l != nil && l.fixed == nil:
			return c.dist(at, &l.Distribution, false)
		case legacy != nil:
			return c.dist("data.shared_prefix."+legacyName, legacy, false)
		case l != nil:
			if *l.fixed < 0 {
				return lengthDist{}, c.errAt(at, "expected >= 0 tokens, found %d", *l.fixed)
			}
			return fixedLength(*l.fixed), nil
		}
		return fixedLength(def), nil
	}
	if s.sys, err = length("system_prompt_len", sp.SystemPromptLen, nil, "", 100); err != nil {
		return err
	}
	if s.question, err = length("question_len", sp.QuestionLen, sp.QuestionDistribution, "question_distribution", 50); err != nil {
		return err
	}
	if s.out, err = length("output_len", sp.OutputLen, sp.OutputDistribution, "output_distribution", 50); err != nil {
		return err
	}
	if set(sp.Multimodal) {
		return c.errAt("data.shared_prefix.multimodal", "images, video and audio are not modelled by this reader")
	}
	s.multiTurn = sp.EnableMultiTurnChat != nil && *sp.EnableMultiTurnChat
	if s.multiTurn {
		note("data.shared_prefix.enable_multi_turn_chat: each of the %d users sends its next round when the last one ended, its prompt the session so far (the system prompt, every earlier prompt and answer) then the new prompt; the context is not truncated, as inference-perf does not truncate it", s.groups*s.perGroup)
	}
	return nil
}

// dist resolves a Distribution with inference-perf's defaults and checks.
func (c *Config) dist(at string, d *Distribution, legacy bool) (lengthDist, error) {
	ld := lengthDist{typ: "normal", min: 10, max: 1024, mean: 512, std: 200, legacy: legacy}
	if d.Type != "" {
		ld.typ = d.Type
	}
	if d.Min != nil {
		ld.min = *d.Min
	}
	if d.Max != nil {
		ld.max = *d.Max
	}
	if d.Mean != nil {
		ld.mean = *d.Mean
	}
	if d.StdDev != nil {
		ld.std = *d.StdDev
	}
	if d.Skew != nil {
		ld.skew = *d.Skew
	}
	if d.Variance != nil {
		if ld.std > 0 {
			return ld, c.errAt(at+".variance", "give std_dev or variance, not both (inference-perf's std_dev defaults to 200: set it to 0 with variance)")
		}
		if *d.Variance < 0 {
			return ld, c.errAt(at+".variance", "expected >= 0, found %g", *d.Variance)
		}
		ld.std = math.Sqrt(*d.Variance)
	}
	switch {
	case ld.min > ld.max:
		return ld, c.errAt(at+".min", "min (%d) is greater than max (%d)", ld.min, ld.max)
	case ld.std < 0:
		return ld, c.errAt(at+".std_dev", "expected >= 0, found %g", ld.std)
	case ld.min < 0:
		return ld, c.errAt(at+".min", "expected >= 0 tokens, found %d", ld.min)
	}
	kinds := "normal, skew_normal, lognormal, uniform, poisson or fixed"
	ok := map[string]bool{"normal": true, "skew_normal": true, "lognormal": true, "uniform": true, "poisson": true, "fixed": true}
	if legacy {
		// generate_distribution, which random and synthetic data use.
		kinds = "normal, lognormal, uniform or fixed"
		ok = map[string]bool{"normal": true, "lognormal": true, "uniform": true, "fixed": true}
		if ld.typ == "normal" && (ld.mean < float64(ld.min) || ld.mean > float64(ld.max)) {
			return ld, c.errAt(at+".mean", "%g is outside [min, max] = [%d, %d]", ld.mean, ld.min, ld.max)
		}
	}
	if !ok[ld.typ] {
		return ld, c.errAt(at+".type", "expected %s, found %q", kinds, ld.typ)
	}
	if ld.typ == "lognormal" && !legacy && !(ld.mean > 0) {
		return ld, c.errAt(at+".mean", "a lognormal needs mean > 0, found %g", ld.mean)
	}
	if ld.typ == "fixed" && ld.mean < 0 {
		return ld, c.errAt(at+".mean", "expected >= 0 tokens, found %g", ld.mean)
	}
	return ld, nil
}
