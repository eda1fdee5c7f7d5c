package sched

import (
	"fmt"

	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/latency"
)

// LoRA is a replica's LoRA adapters (docs/engine.md, "LoRA"), as vLLM's
// scheduler and LoRA manager treat them: a step serves requests of at most
// MaxLoras distinct adapters (vLLM v1 Scheduler.schedule skips a waiting
// request whose adapter would be one too many, and takes the ones behind
// it); the GPU holds MaxLoras adapter slots, and a request whose adapter is
// not in one loads it into the slot of the least recently used adapter no
// running request uses. The load runs in the step that first serves the
// request, before its forward pass (vLLM activates the step's adapters in
// the model runner), and takes the adapter's bytes over the host link;
// with MaxCPU > 0 host memory holds MaxCPU adapters and one in neither
// cache is first read from local storage.
//
// Adapters are numbered from 1 (request.State.LoRA; 0 is the base model).
type LoRA struct {
	MaxLoras int
	MaxCPU   int               // 0: every adapter is in host memory
	Index    map[string]uint16 // name → adapter number
	Names    []string          // by number - 1
	Bytes    []int64           // weights, all TP ranks
	FLOPs    []int64           // per token, all ranks: 2·rank·Σ(in+out) over target modules and layers
	LoadUS   []int64           // host memory → GPU slot
	FetchUS  []int64           // local storage → host memory (MaxCPU > 0)
}

// loraState is a scheduler's adapters: per adapter (by number) the running
// requests that use it and the LRU stamps of its GPU slot and host copy (0:
// not there).
type loraState struct {
	cfg     *LoRA
	ref     []int32
	gpu     []int64
	cpu     []int64
	ngpu    int   // adapters in GPU slots
	ncpu    int   // adapters in host memory (MaxCPU > 0)
	nact    int   // adapters with running requests (all in GPU slots)
	clock   int64 // LRU clock
	dec     int64 // Σ per-token FLOPs over the decoding requests
	actB    int64 // Σ bytes of the adapters with running requests
	loadUS  int64 // cold loads of the step being formed
	loads   int64 // cold loads so far
	skipped []*request.State
}

func newLoRAState(c *LoRA) *loraState {
	n := len(c.Names) + 1
	return &loraState{cfg: c, ref: make([]int32, n), gpu: make([]int64, n), cpu: make([]int64, n)}
}

// loraOf is r's adapter number on this replica (0: the base model, or a
// name the registry lacks, which the cluster rejects before routing).
func (s *VLLM) loraOf(r *request.State) uint16 {
	if r.Req.LoRA == "" {
		return 0
	}
	return s.lora.cfg.Index[r.Req.LoRA]
}

// loraFits: r's adapter is in a GPU slot, or one is free, or one holds an
// adapter no running request uses.
func (s *VLLM) loraFits(r *request.State) bool {
	l := s.lora
	return l.gpu[r.LoRA] != 0 || l.ngpu < l.cfg.MaxLoras || l.nact < l.ngpu
}

// loraTake makes r's adapter resident (charging its load to the step being
// formed) and counts r as its user.
func (s *VLLM) loraTake(r *request.State) {
	l, a := s.lora, r.LoRA
	l.clock++
	if l.gpu[a] == 0 {
		if l.ngpu == l.cfg.MaxLoras {
			l.gpu[lruIdle(l.gpu, l.ref)] = 0
			l.ngpu--
		}
		l.ngpu++
		l.loads++
		l.loadUS += l.cfg.LoadUS[a-1]
		if l.cfg.MaxCPU > 0 && l.cpu[a] == 0 {
			if l.ncpu == l.cfg.MaxCPU {
				l.cpu[lruIdle(l.cpu, nil)] = 0
				l.ncpu--
			}
			l.ncpu++
			l.cpu[a] = l.clock
			l.loadUS += l.cfg.FetchUS[a-1]
		}
	}
	l.gpu[a] = l.clock
	if l.cpu[a] != 0 {
		l.cpu[a] = l.clock
	}
	l.ref[a]++
	if l.ref[a] == 1 {
		l.nact++
		l.actB += l.cfg.Bytes[a-1]
	}
}

// loraDrop: r no longer runs here; its adapter stays resident, last used now.
func (s *VLLM) loraDrop(r *request.State) {
	l, a := s.lora, r.LoRA
	l.ref[a]--
	if l.ref[a] == 0 {
		l.nact--
		l.actB -= l.cfg.Bytes[a-1]
		l.clock++
		l.gpu[a] = l.clock
	}
}

// lruIdle is the least recently used resident adapter with no running
// request (ref nil: any); the caller knows one exists.
func lruIdle(stamp []int64, ref []int32) int {
	best := 0
	for a := 1; a < len(stamp); a++ {
		if stamp[a] != 0 && (ref == nil || ref[a] == 0) && (best == 0 || stamp[a] < stamp[best]) {
			best = a
		}
	}
	return best
}

// loraRequeue puts back the waiting requests admit skipped for want of a
// slot; they keep their place (the queue's order is theirs).
func (s *VLLM) loraRequeue() {
	l := s.lora
	for i, r := range l.skipped {
		s.waiting.push(r)
		l.skipped[i] = nil
	}
	l.skipped = l.skipped[:0]
}

// loraBatch adds the step's adapter work to b: the shrink and expand
// FLOPs of every token of an adapted request, the weights of every adapter
// the running requests use (read once per step), and the cold loads.
func (s *VLLM) loraBatch(b *latency.Batch) {
	l := s.lora
	f := l.dec * int64(1+b.Draft)
	for _, r := range s.sched {
		if r.LoRA != 0 {
			f += l.cfg.FLOPs[r.LoRA-1] * int64(r.Chunk)
		}
	}
	b.LoRAFLOPs, b.LoRABytes, b.LoRALoadUS = f, l.actB, l.loadUS
	l.loadUS = 0
}

// ResidentLoRAs appends the adapters in this replica's GPU slots, by
// registry order (a routing view; nil without LoRA).
func (s *VLLM) ResidentLoRAs(dst []string) []string {
	if s.lora == nil {
		return dst
	}
	for a := 1; a < len(s.lora.gpu); a++ {
		if s.lora.gpu[a] != 0 {
			dst = append(dst, s.lora.cfg.Names[a-1])
		}
	}
	return dst
}

// LoRASlots is the adapters in use by running requests and the slots
// (vLLM's vllm:lora_requests_info reports running_lora_adapters and
// max_lora); 0, 0 without LoRA.
func (s *VLLM) LoRASlots() (active, slots int) {
	if s.lora == nil {
		return 0, 0
	}
	return s.lora.nact, s.lora.cfg.MaxLoras
}

// HasLoRA reports whether adapter name is in a GPU slot here.
func (s *VLLM) HasLoRA(name string) bool {
	if s.lora == nil || name == "" {
		return false
	}
	a := s.lora.cfg.Index[name]
	return a != 0 && s.lora.gpu[a] != 0
}

// LoRALoads is the adapters loaded into GPU slots so far.
func (s *VLLM) LoRALoads() int64 {
	if s.lora == nil {
		return 0
	}
	return s.lora.loads
}

// loraCheck: at most max_loras adapters resident, every running request's
// adapter resident, the counts equal to what they count.
func (s *VLLM) loraCheck() error {
	l := s.lora
	if l.ngpu > l.cfg.MaxLoras {
		return fmt.Errorf("step %d: %d adapters resident > max_loras %d", s.step, l.ngpu, l.cfg.MaxLoras)
	}
	ref := make([]int32, len(l.ref))
	for r := s.runHead; r != nil; r = r.RNext {
		if r.LoRA == 0 {
			continue
		}
		if l.gpu[r.LoRA] == 0 {
			return fmt.Errorf("step %d: request %s runs with adapter %s, which is not resident", s.step, r.Req.ID, l.cfg.Names[r.LoRA-1])
		}
		ref[r.LoRA]++
	}
	ngpu, ncpu, nact := 0, 0, 0
	for a := 1; a < len(ref); a++ {
		if ref[a] != l.ref[a] {
			return fmt.Errorf("step %d: adapter %s has %d running requests, counted %d", s.step, l.cfg.Names[a-1], ref[a], l.ref[a])
		}
		if l.gpu[a] != 0 {
			ngpu++
		}
		if l.cpu[a] != 0 {
			ncpu++
		}
		if ref[a] > 0 {
			nact++
		}
	}
	if ngpu != l.ngpu || ncpu != l.ncpu || nact != l.nact || nact > l.cfg.MaxLoras {
		return fmt.Errorf("step %d: adapter counts %d resident, %d in host memory, %d active; counted %d, %d, %d", s.step, ngpu, ncpu, nact, l.ngpu, l.ncpu, l.nact)
	}
	if l.cfg.MaxCPU > 0 && ncpu > l.cfg.MaxCPU {
		return fmt.Errorf("step %d: %d adapters in host memory > max_cpu_loras %d", s.step, ncpu, l.cfg.MaxCPU)
	}
	return nil
}

func (l *loraState) clone(c *request.Clone) *loraState {
	d := *l
	d.ref = append([]int32(nil), l.ref...)
	d.gpu = append([]int64(nil), l.gpu...)
	d.cpu = append([]int64(nil), l.cpu...)
	d.skipped = mapAll(c, l.skipped)
	return &d
}
