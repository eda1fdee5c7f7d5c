// Package fakellm is an OpenAI-compatible server for tests: it streams
// completions with a configured time to first token and inter-token
// latency, keeps a prefix cache of its prompts' blocks (reported as
// cached_tokens), enforces a concurrency limit, fails the requests it is
// told to, and logs what it received and when, so tests can check a load
// generator against the server's own view.
package fakellm

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/blis-sim/blis/lib/load/internal/wait"
)

// Config shapes the server's behaviour.
type Config struct {
	TTFT time.Duration // from the request reaching the server (or a slot) to the first token
	ITL  time.Duration // between tokens
	// MaxConcurrent > 0 limits the requests being served; over it a request
	// waits for a slot (Queue) or is answered 429 Too Many Requests.
	MaxConcurrent int
	Queue         bool
	Models        []string // served models (default "fake-model")
	// NaturalTokens > 0 ends a generation after this many tokens unless
	// the request forces its length (min_tokens or ignore_eos): a model
	// reaching its end-of-sequence token.
	NaturalTokens int
	NoUsage       bool // never report usage
	// RejectExtensions answers 400 to min_tokens and ignore_eos, as
	// OpenAI's own API does to fields it does not know.
	RejectExtensions bool
	BlockSize        int // prefix-cache block (default 16)
	// Fail, when set, decides per request whether and how it fails.
	Fail func(r *Request) Failure
}

// Failure is how one request fails.
type Failure struct {
	Status int // answer this HTTP status before streaming (0 = stream)
	// CutAfter >= 0 closes the connection after that many tokens
	// (-1 = no cut). StreamError sends an error event instead.
	CutAfter    int
	StreamError string
}

// Request is the server's record of one completion request.
type Request struct {
	Path      string
	Model     string
	Prompt    []uint32 // token ids (completions) or word hashes (chat)
	MaxTokens int
	MinTokens int
	IgnoreEOS bool
	Usage     bool // stream_options.include_usage
	Stream    bool

	Received   time.Time
	Admitted   time.Time // got a slot (Received when it did not wait)
	FirstToken time.Time // the first chunk began to be written
	Done       time.Time // the request finished (just before [DONE] was written)
	Generated  int
	Cached     int
	Status     int
}

// Server is a running fake.
type Server struct {
	*httptest.Server
	cfg Config

	mu       sync.Mutex
	log      []*Request
	inflight int
	maxSeen  int
	cache    map[uint64]bool
	slots    chan struct{}
}

// New starts a server on a loopback port.
func New(cfg Config) *Server {
	s := NewUnstarted(cfg)
	s.Start()
	return s
}

// NewUnstarted returns a server to start with Start (after setting its
// Listener, to serve on a chosen address).
func NewUnstarted(cfg Config) *Server {
	if len(cfg.Models) == 0 {
		cfg.Models = []string{"fake-model"}
	}
	if cfg.BlockSize == 0 {
		cfg.BlockSize = 16
	}
	s := &Server{cfg: cfg, cache: map[uint64]bool{}}
	if cfg.MaxConcurrent > 0 {
		s.slots = make(chan struct{}, cfg.MaxConcurrent)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("POST /v1/completions", s.complete)
	mux.HandleFunc("POST /v1/chat/completions", s.complete)
	s.Server = httptest.NewUnstartedServer(mux)
	return s
}

// URL0 is the API base (http://127.0.0.1:port/v1).
func (s *Server) URL0() string { return s.URL + "/v1" }

// Requests returns the log, in the order requests arrived.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.log))
	for i, r := range s.log {
		out[i] = *r
	}
	return out
}

// MaxInFlight is the most requests the server served at once.
func (s *Server) MaxInFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxSeen
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	type model struct {
		ID     string `json:"id"`
		Object string `json:"object"`
	}
	var list struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}
	list.Object = "list"
	for _, m := range s.cfg.Models {
		list.Data = append(list.Data, model{m, "model"})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(list)
}

type body struct {
	Model         string          `json:"model"`
	Prompt        json.RawMessage `json:"prompt"`
	Messages      []struct{ Content string }
	MaxTokens     *int `json:"max_tokens"`
	MinTokens     *int `json:"min_tokens"`
	IgnoreEOS     *bool
	Stream        bool `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

func httpError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"object":"error","message":%q,"type":"BadRequestError","code":%d}`, msg, code)
}

func (s *Server) complete(w http.ResponseWriter, hr *http.Request) {
	rec := &Request{Path: hr.URL.Path, Received: time.Now()}
	s.mu.Lock()
	s.log = append(s.log, rec)
	s.mu.Unlock()
	fail := func(code int, msg string) {
		s.mu.Lock()
		rec.Status, rec.Done = code, time.Now()
		s.mu.Unlock()
		httpError(w, code, msg)
	}
	var b body
	raw := map[string]json.RawMessage{}
	dec := json.NewDecoder(hr.Body)
	if err := dec.Decode(&raw); err != nil {
		fail(400, "invalid JSON: "+err.Error())
		return
	}
	buf, _ := json.Marshal(raw)
	if err := json.Unmarshal(buf, &b); err != nil {
		fail(400, "invalid request: "+err.Error())
		return
	}
	if v, ok := raw["ignore_eos"]; ok {
		var x bool
		json.Unmarshal(v, &x)
		b.IgnoreEOS = &x
	}
	chat := strings.HasSuffix(hr.URL.Path, "/chat/completions")
	s.mu.Lock()
	rec.Model, rec.Stream = b.Model, b.Stream
	rec.Usage = b.StreamOptions != nil && b.StreamOptions.IncludeUsage
	if b.MaxTokens != nil {
		rec.MaxTokens = *b.MaxTokens
	}
	if b.MinTokens != nil {
		rec.MinTokens = *b.MinTokens
	}
	rec.IgnoreEOS = b.IgnoreEOS != nil && *b.IgnoreEOS
	if chat {
		if len(b.Messages) > 0 {
			for _, word := range strings.Fields(b.Messages[len(b.Messages)-1].Content) {
				h := fnv.New32a()
				h.Write([]byte(word))
				rec.Prompt = append(rec.Prompt, h.Sum32())
			}
		}
	} else if err := json.Unmarshal(b.Prompt, &rec.Prompt); err != nil {
		s.mu.Unlock()
		fail(400, "prompt: expected a list of token ids")
		return
	}
	s.mu.Unlock()
	switch {
	case !contains(s.cfg.Models, b.Model):
		fail(404, fmt.Sprintf("The model `%s` does not exist.", b.Model))
		return
	case s.cfg.RejectExtensions && (b.MinTokens != nil || b.IgnoreEOS != nil):
		fail(400, "Unrecognized request argument supplied: min_tokens, ignore_eos")
		return
	case rec.MaxTokens < 1:
		fail(400, "max_tokens must be at least 1")
		return
	case !b.Stream:
		fail(400, "this fake only streams")
		return
	}
	var f Failure
	f.CutAfter = -1
	if s.cfg.Fail != nil {
		s.mu.Lock()
		cp := *rec
		s.mu.Unlock()
		f = s.cfg.Fail(&cp)
	}
	if f.Status != 0 {
		fail(f.Status, fmt.Sprintf("injected failure %d", f.Status))
		return
	}
	// The clock of a request starts when it reached the handler, or when
	// it got a slot after waiting for one.
	admitted := rec.Received
	if s.slots != nil {
		if s.cfg.Queue {
			select {
			case s.slots <- struct{}{}:
			default:
				select {
				case s.slots <- struct{}{}:
					admitted = time.Now()
				case <-hr.Context().Done():
					return
				}
			}
		} else {
			select {
			case s.slots <- struct{}{}:
			default:
				fail(429, "too many requests in flight")
				return
			}
		}
	}
	s.mu.Lock()
	rec.Admitted = admitted
	s.inflight++
	s.maxSeen = max(s.maxSeen, s.inflight)
	s.mu.Unlock()
	// The request leaves the server before its last bytes reach the
	// client (so a client reacting to [DONE] never sees it still counted).
	released := false
	release := func() {
		if released {
			return
		}
		released = true
		s.mu.Lock()
		s.inflight--
		s.mu.Unlock()
		if s.slots != nil {
			<-s.slots
		}
	}
	defer release()

	n := rec.MaxTokens
	if s.cfg.NaturalTokens > 0 && !rec.IgnoreEOS && rec.MinTokens < n {
		n = max(min(n, s.cfg.NaturalTokens), rec.MinTokens)
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(200)
	fl := w.(http.Flusher)
	fl.Flush()
	sleepUntil(admitted.Add(s.cfg.TTFT))
	cached := s.prefill(rec.Prompt)
	for i := 0; i < n; i++ {
		if i > 0 {
			// Go's timer: inter-token gaps need no µs precision here.
			select {
			case <-time.After(time.Until(admitted.Add(s.cfg.TTFT + time.Duration(i)*s.cfg.ITL))):
			case <-hr.Context().Done(): // the client went away
				s.finish(rec, i, cached, 499)
				return
			}
		}
		if f.CutAfter == i {
			if f.StreamError != "" {
				fmt.Fprintf(w, "data: {\"error\":{\"message\":%q,\"type\":\"InternalServerError\",\"code\":500}}\n\n", f.StreamError)
				fl.Flush()
				s.finish(rec, i, cached, 200)
				return
			}
			// Drop the connection mid-stream.
			s.finish(rec, i, cached, 200)
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					c.(*net.TCPConn).SetLinger(0)
					c.Close()
				}
			}
			return
		}
		finish := "null"
		if i == n-1 {
			finish = `"length"`
		}
		// The first chunk's time is taken before it is written: taken
		// after the flush (and a contended lock), a descheduled handler
		// stamped it after the client had read the chunk.
		var wrote time.Time
		if i == 0 {
			wrote = time.Now()
		}
		if chat {
			role := ""
			if i == 0 {
				role = `"role":"assistant",`
			}
			fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{%s\"content\":\" tok\"},\"finish_reason\":%s}]}\n\n", b.Model, role, finish)
		} else {
			fmt.Fprintf(w, "data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"model\":%q,\"choices\":[{\"index\":0,\"text\":\" tok\",\"logprobs\":null,\"finish_reason\":%s}]}\n\n", b.Model, finish)
		}
		fl.Flush()
		if i == 0 {
			s.mu.Lock()
			rec.FirstToken = wrote
			s.mu.Unlock()
		}
	}
	if rec.Usage && !s.cfg.NoUsage {
		fmt.Fprintf(w, "data: {\"id\":\"cmpl-1\",\"model\":%q,\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d,\"prompt_tokens_details\":{\"cached_tokens\":%d}}}\n\n",
			b.Model, len(rec.Prompt), n, len(rec.Prompt)+n, cached)
	}
	s.finish(rec, n, cached, 200)
	release()
	fmt.Fprint(w, "data: [DONE]\n\n")
	fl.Flush()
}

func (s *Server) finish(rec *Request, generated, cached, status int) {
	s.mu.Lock()
	rec.Generated, rec.Cached, rec.Status, rec.Done = generated, cached, status, time.Now()
	s.mu.Unlock()
}

// prefill looks the prompt up in the prefix cache and adds its full
// blocks: vLLM's accounting (whole blocks, the last prompt token always
// computed).
func (s *Server) prefill(p []uint32) int {
	bs := s.cfg.BlockSize
	s.mu.Lock()
	defer s.mu.Unlock()
	var h uint64 = 14695981039346656037
	hits, counting := 0, true
	for blk := 0; (blk+1)*bs <= len(p); blk++ {
		var b [4]byte
		for _, id := range p[blk*bs : (blk+1)*bs] {
			binary.LittleEndian.PutUint32(b[:], id)
			for _, c := range b {
				h = (h ^ uint64(c)) * 1099511628211
			}
		}
		if counting && s.cache[h] && (blk+1)*bs <= len(p)-1 {
			hits++
		} else {
			counting = false
		}
		s.cache[h] = true
	}
	return hits * bs
}

// sleepUntil keeps the configured delays to a few µs (Go's own timers are
// up to a millisecond late).
func sleepUntil(t time.Time) { wait.Until(t, nil) }

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}
