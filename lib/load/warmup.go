package load

import (
	"context"
	"fmt"
	"sync"

	"github.com/blis-sim/blis/lib/bug"
	"github.com/blis-sim/blis/lib/trace"
)

// Warmup sends Options.Warmup requests before the session, with the token
// counts of the table's first llm rows (cycled) and prompts of their own
// (no prefix shared with the session's), Concurrency at a time (16 when
// uncapped), and waits for them. A Stop during the warm-up ends it
// (Stopped); the session should then not run. Warm-up requests also open
// the connections the session reuses.
func (s *Session) Warmup(ctx context.Context) (WarmupSummary, error) {
	shapes := s.warmShapes
	if len(shapes) == 0 {
		shapes = [][2]int32{{128, 16}}
	}
	conc := s.opts.Concurrency
	if conc <= 0 {
		conc = min(s.opts.Warmup, 16)
	}
	clock := NewClock()
	sem := make(chan struct{}, conc)
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	p := s.opts.Prompts
	p.Seed ^= 0x9e3779b97f4a7c15 // warm-up prompts share nothing with the session's
	for i := 0; i < s.opts.Warmup; i++ {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			s.warm.Stopped = true
			return s.warm, nil
		case <-s.stopReq:
			wg.Wait()
			s.warm.Stopped = true
			return s.warm, nil
		}
		sh := shapes[i%len(shapes)]
		r := trace.NewRequest(fmt.Sprintf("warmup-%d", i))
		r.InputTokens, r.OutputTokens = max(sh[0], 1), sh[1]
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			defer bug.Catch()
			ids := p.AppendIDs(nil, &r)
			var text []byte
			if s.target.API == Chat {
				text = p.AppendWords(nil, ids)
			}
			body := appendBody(nil, s.target.API, s.model, ids, text, max(int(r.OutputTokens), 1), s.target.Ext)
			o := newOutcome(nil)
			send(ctx, s.hc, s.target, clock, body, o, false, s.opts.MaxEvent)
			mu.Lock()
			defer mu.Unlock()
			s.warm.Sent++
			if o.status == trace.StatusCompleted {
				s.warm.Completed++
			} else if s.warm.FirstError == "" {
				s.warm.FirstError = o.status + ": " + o.reason
			}
		}()
	}
	wg.Wait()
	return s.warm, nil
}
