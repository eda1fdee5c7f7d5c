package convert

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"math"

	"github.com/blis-sim/blis/lib/trace"
)

// WEKA kv-cache-tester Claude Code traces: one JSON document per
// conversation; sub-agents nest their own requests, timed from their start.

type wekaFile struct {
	ID          string    `json:"id"`
	BlockSize   num       `json:"block_size"`
	HashIDScope string    `json:"hash_id_scope"`
	Requests    []wekaReq `json:"requests"`
}

type wekaReq struct {
	T            num       `json:"t"`
	Type         string    `json:"type"`
	Model        string    `json:"model"`
	In           num       `json:"in"`
	Out          num       `json:"out"`
	HashIDs      []int64   `json:"hash_ids"`
	APITime      num       `json:"api_time"`
	TTFT         num       `json:"ttft"`
	AgentID      string    `json:"agent_id"`
	SubagentType string    `json:"subagent_type"`
	DurationMS   num       `json:"duration_ms"`
	Requests     []wekaReq `json:"requests"`
}

// wekaNode is an emitted request with its recorded start and finish.
type wekaNode struct {
	id     string
	finish int64
}

type wekaParser struct {
	in    *input
	conv  string
	rows  []Row
	i     int
	fm    formatMeta
	order int64
	ns    uint64 // hash namespace of this conversation
}

func newWeka(in *input, o *Options) (parser, error) {
	var f wekaFile
	if err := decodeDoc(in, &f); err != nil {
		return nil, err
	}
	if f.Requests == nil {
		return nil, &BadRowError{Path: in.name, Column: "requests", Expected: "an array of calls", Found: "nothing"}
	}
	p := &wekaParser{in: in, conv: f.ID, fm: formatMeta{name: "weka", blockSize: 64, ownIDs: true}}
	if p.conv == "" {
		p.conv = baseName(in.path)
	}
	if f.BlockSize != nil {
		bs, ok := parseInt(f.BlockSize)
		if !ok || bs <= 0 || bs > math.MaxInt32 {
			return nil, &BadRowError{Path: in.name, Column: "block_size", Expected: "a positive integer", Found: quoteFound(f.BlockSize)}
		}
		p.fm.blockSize = int(bs)
	}
	h := fnv.New64a()
	h.Write([]byte(p.conv))
	p.ns = h.Sum64()
	if _, err := p.level(f.Requests, 0, "requests", wekaNode{}, "main"); err != nil {
		return nil, err
	}
	// Every row sorts at its conversation's start so sessions stay contiguous.
	for i := range p.rows {
		p.rows[i].T = p.rows[0].T
	}
	return p, nil
}

func (p *wekaParser) meta() formatMeta { return p.fm }
func (p *wekaParser) path() string     { return p.in.name }

func (p *wekaParser) next(r *Row) error {
	if p.i >= len(p.rows) {
		return io.EOF
	}
	*r = p.rows[p.i]
	p.rows[p.i] = Row{}
	p.i++
	return nil
}

func (p *wekaParser) bad(path, expected string, found num) error {
	return &BadRowError{Path: p.in.name, Column: path, Expected: expected, Found: quoteFound(found)}
}

func (p *wekaParser) secs(path string, n num, required bool) (int64, bool, error) {
	if n == nil {
		if required {
			return 0, false, &BadRowError{Path: p.in.name, Column: path, Expected: "seconds", Found: "nothing"}
		}
		return 0, false, nil
	}
	v, ok := parseScaled(n, 1_000_000)
	if !ok || v < 0 {
		return 0, false, p.bad(path, "seconds >= 0", n)
	}
	return v, true, nil
}

// hash namespaces a conversation-local block id so that two conversations
// never share a hash by accident.
func (p *wekaParser) hash(local int64) uint64 {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(local))
	h := p.ns
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// level converts one level of requests whose times count from base (µs in
// the conversation). launch is the request that started this level (a
// sub-agent's parent call), zero for the conversation itself. It returns the
// level's last request.
func (p *wekaParser) level(reqs []wekaReq, base int64, path string, launch wekaNode, step string) (wekaNode, error) {
	prev := launch
	var subs []struct {
		last wekaNode
		end  int64
	}
	for i := range reqs {
		q := &reqs[i]
		qp := fmt.Sprintf("%s[%d]", path, i)
		t, _, err := p.secs(qp+".t", q.T, true)
		if err != nil {
			return prev, err
		}
		at := base + t
		if q.Type == "subagent" || q.Requests != nil {
			// A sub-agent's t is when its result came back; it started
			// duration_ms earlier.
			dur, _, err := p.secs(qp+".duration_ms", q.DurationMS, false)
			if err != nil {
				return prev, err
			}
			dur /= 1000
			start := max(at-dur, base)
			st := q.SubagentType
			if st == "" {
				st = "subagent"
			}
			last, err := p.level(q.Requests, start, qp+".requests", prev, st)
			if err != nil {
				return prev, err
			}
			subs = append(subs, struct {
				last wekaNode
				end  int64
			}{last, at})
			continue
		}
		p.order++
		r := Row{Request: trace.NewRequest(fmt.Sprintf("%s:%d", p.conv, p.order))}
		r.SourceRow = p.order
		r.SessionID = p.conv
		r.StepID = step
		r.Model = q.Model
		in, ok := parseTokens(q.In)
		if !ok {
			return prev, p.bad(qp+".in", "a token count", q.In)
		}
		out, ok := parseTokens(q.Out)
		if !ok {
			return prev, p.bad(qp+".out", "a token count", q.Out)
		}
		r.InputTokens, r.OutputTokens = in, out
		if len(q.HashIDs) > 0 {
			r.PrefixHashes = make([]uint64, len(q.HashIDs))
			for j, h := range q.HashIDs {
				r.PrefixHashes[j] = p.hash(h)
			}
		}
		api, hasAPI, err := p.secs(qp+".api_time", q.APITime, false)
		if err != nil {
			return prev, err
		}
		ttft, hasTTFT, err := p.secs(qp+".ttft", q.TTFT, false)
		if err != nil {
			return prev, err
		}
		if hasAPI {
			r.RecordedE2EUS = api
		}
		if hasTTFT {
			r.RecordedTTFTUS = ttft
		}
		if hasAPI && hasTTFT && out > 1 && api >= ttft {
			r.RecordedITLUS = (api - ttft) / int64(out-1)
		}
		// Dependencies: the previous call at this level (or the call that
		// launched this sub-agent) and every sub-agent that had returned.
		var ready int64
		if prev.id != "" {
			r.DependsOn = append(r.DependsOn, prev.id)
			ready = prev.finish
		}
		kept := subs[:0]
		for _, s := range subs {
			if s.end <= at && s.last.id != "" {
				r.DependsOn = append(r.DependsOn, s.last.id)
				ready = max(ready, s.last.finish)
			} else {
				kept = append(kept, s)
			}
		}
		subs = kept
		if len(r.DependsOn) == 0 {
			r.ArrivalUS = 0
			r.T = at
		} else {
			r.DelayUS = max(at-ready, 0)
		}
		p.rows = append(p.rows, r)
		prev = wekaNode{id: r.ID, finish: at + api}
	}
	// A level that ends with sub-agents still out finishes with the last of them.
	for _, s := range subs {
		if s.last.id != "" && s.last.finish > prev.finish {
			prev = s.last
		}
	}
	return prev, nil
}

// wekaMerge chains several conversation files, conversation k starting
// k × gap after the first.
type wekaMerge struct {
	ps []parser
	i  int
}

func mergeWeka(ps []parser, gap int64) (parser, error) {
	bs := ps[0].meta().blockSize
	for k, q := range ps {
		w := q.(*wekaParser)
		if w.fm.blockSize != bs {
			return nil, usageErr("%s has block_size %d but %s has %d: prefix hashes of different block sizes cannot share a table", ps[0].path(), bs, w.path(), w.fm.blockSize)
		}
		w.shift(int64(k) * gap)
	}
	return &wekaMerge{ps: ps}, nil
}

func (m *wekaMerge) meta() formatMeta { return m.ps[0].meta() }
func (m *wekaMerge) path() string     { return m.ps[min(m.i, len(m.ps)-1)].path() }

func (m *wekaMerge) next(r *Row) error {
	for m.i < len(m.ps) {
		err := m.ps[m.i].next(r)
		if err == io.EOF {
			m.i++
			continue
		}
		return err
	}
	return io.EOF
}

func (p *wekaParser) shift(d int64) {
	for i := range p.rows {
		p.rows[i].T += d
	}
}
