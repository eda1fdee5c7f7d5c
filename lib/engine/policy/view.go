package policy

import (
	"math"

	"github.com/blis-sim/blis/lib/engine/row"
)

// RequestView is a read-only view of the request a decision is about.
type RequestView struct {
	r   *row.Request
	now int64
	pb  func() int
}

// NewRequestView wraps r for a decision taken at now; promptBlocks, if not
// nil, answers PrefixBlocks lazily.
func NewRequestView(r *row.Request, now int64, promptBlocks func() int) RequestView {
	return RequestView{r: r, now: now, pb: promptBlocks}
}

func (v RequestView) ID() string         { return v.r.ID }
func (v RequestView) TenantID() string   { return v.r.TenantID }
func (v RequestView) SLOClass() string   { return v.r.SLOClass }
func (v RequestView) Model() string      { return v.r.Model }
func (v RequestView) SessionID() string  { return v.r.SessionID }
func (v RequestView) Priority() int32    { return v.r.Priority }
func (v RequestView) InputTokens() int32 { return v.r.InputTokens }

// LoRA is the request's LoRA adapter ("" = the base model).
func (v RequestView) LoRA() string { return v.r.LoRA }

// TrueOutputTokens is the output length the request will generate: an
// oracle (no real router knows it before the answer ends). Policy bundles
// see a prediction instead unless they declare oracle: true.
func (v RequestView) TrueOutputTokens() int32 { return v.r.OutputTokens }
func (v RequestView) ArrivalUS() int64        { return v.r.ArrivalUS }
func (v RequestView) NowUS() int64            { return v.now }

// PrefixBlocks is the number of the prompt's engine blocks that carry a
// prefix-cache key (0 without prefix hashes or with caching off).
func (v RequestView) PrefixBlocks() int {
	if v.pb == nil {
		return 0
	}
	return v.pb()
}

// ReplicaStatus is what the cluster reports about a replica to the router.
type ReplicaStatus struct {
	Waiting  int   // in the replica's waiting queue
	Running  int   // in its running batch
	InFlight int   // routed there, not yet in its queue (alpha delay, or since the snapshot)
	KVUsed   int64 // KV blocks in use (not in the free queue)
	KVTotal  int64
}

// TierStatus is what a replica reports of one of its lower KV tiers.
type TierStatus struct {
	Name        string
	Used, Total int64   // blocks held, capacity
	OffloadRate float64 // blocks copied in per second (recent window)
	ReloadRate  float64 // blocks loaded to the GPU per second (recent window)
}

// ReplicaView is the router's read-only view of one candidate replica.
type ReplicaView struct {
	id, deployment, role, state string
	s                           ReplicaStatus
	tiers                       []TierStatus // lower KV tiers, top down; nil without
	loras                       []string     // LoRA adapters in its GPU slots, as last reported
	loraFree                    int          // slots not held by an adapter of a running request
}

func (v *ReplicaView) ID() string         { return v.id }
func (v *ReplicaView) Deployment() string { return v.deployment }
func (v *ReplicaView) Role() string       { return v.role }
func (v *ReplicaView) State() string      { return v.state }
func (v *ReplicaView) Waiting() int       { return v.s.Waiting }
func (v *ReplicaView) Running() int       { return v.s.Running }
func (v *ReplicaView) InFlight() int      { return v.s.InFlight }
func (v *ReplicaView) KVUsed() int64      { return v.s.KVUsed }
func (v *ReplicaView) KVTotal() int64     { return v.s.KVTotal }

// Tiers is the replica's lower KV tiers as last reported, top down (nil
// without tiers). Read-only.
func (v *ReplicaView) Tiers() []TierStatus { return v.tiers }

// LoRAs is the LoRA adapters resident in the replica's GPU slots as last
// reported (vLLM's vllm:lora_requests_info gauge lists those running and
// waiting), in registry order; nil without LoRA. Read-only.
func (v *ReplicaView) LoRAs() []string { return v.loras }

// LoRAFreeSlots is the adapter slots not held by an adapter that running
// requests use (max_loras − running adapters): a request whose adapter is
// not resident waits for a slot where this is 0.
func (v *ReplicaView) LoRAFreeSlots() int { return v.loraFree }

// HasLoRA reports whether adapter name is resident on the replica.
func (v *ReplicaView) HasLoRA(name string) bool {
	if name == "" {
		return false
	}
	for _, n := range v.loras {
		if n == name {
			return true
		}
	}
	return false
}

// Load is waiting + running + in flight: what least-loaded routing uses.
func (v *ReplicaView) Load() int { return v.s.Waiting + v.s.Running + v.s.InFlight }

// KVUtilization is the fraction of KV blocks in use (0 when unknown).
func (v *ReplicaView) KVUtilization() float64 {
	if v.s.KVTotal <= 0 {
		return 0
	}
	return float64(v.s.KVUsed) / float64(v.s.KVTotal)
}

// PrefixOracle answers, for the request being decided, how many leading
// prompt blocks candidate i holds in its prefix cache.
type PrefixOracle interface {
	CachedBlocks(i int) int
	// Holders lists the candidates holding at least one leading block,
	// when the oracle can enumerate them (a global prefix index); ok is
	// false when it cannot (then ask every candidate).
	Holders() (holders []int32, ok bool)
}

// ClusterView is what a policy sees of the cluster for one decision: the
// candidate replicas for the request (those of the deployments serving its
// model), refreshed live or every snapshot interval.
type ClusterView struct {
	b        *Board
	now      int64
	prefix   PrefixOracle
	scores   []float64
	scored   bool
	filtered []Filtered
}

// Filtered is a candidate a routing policy ruled out before choosing, and
// why (kept for decision traces).
type Filtered struct {
	Index  int
	Reason string
}

func (c *ClusterView) NowUS() int64 { return c.now }

// Len is the number of candidates.
func (c *ClusterView) Len() int { return len(c.b.reps) }

// Replica is candidate i (0 ≤ i < Len).
func (c *ClusterView) Replica(i int) *ReplicaView {
	if b := c.b; b.volAt != nil && c.now >= b.volAt[i] {
		b.onRead(i)
	}
	return &c.b.reps[i]
}

// current is every candidate's view, the volatile ones refreshed (for a
// policy that scans them all for their KV use).
func (c *ClusterView) current() []ReplicaView {
	if b := c.b; b.volAt != nil {
		for i, at := range b.volAt {
			if c.now >= at {
				b.onRead(i)
			}
		}
	}
	return c.b.reps
}

// CachedBlocks is the number of leading prompt blocks of the request being
// decided that candidate i holds in its prefix cache, as a router fed by
// the replicas' KV-cache events knows it (as late as it hears them:
// config kv_event_delay).
func (c *ClusterView) CachedBlocks(i int) int {
	if c.prefix == nil {
		return 0
	}
	return c.prefix.CachedBlocks(i)
}

// LeastLoaded is the candidate with the smallest Load, the lowest index
// among equals: O(1) from the board's load tree on large groups.
func (c *ClusterView) LeastLoaded() int {
	if t := c.b.tree; t != nil {
		return int(uint32(t[1]))
	}
	reps := c.b.reps
	best, bl := 0, reps[0].Load()
	for i := 1; i < len(reps); i++ {
		if l := reps[i].Load(); l < bl {
			best, bl = i, l
		}
	}
	return best
}

// PrefixHolders lists the candidates holding at least one leading prompt
// block of the request, when a global prefix index can say (ok); without
// one, ask CachedBlocks of every candidate.
func (c *ClusterView) PrefixHolders() ([]int32, bool) {
	if c.prefix == nil {
		return nil, true
	}
	return c.prefix.Holders()
}

// KeepsScores reports whether Score calls are kept (decision traces):
// policies with a faster path than scoring every candidate use it only
// when nobody reads the scores.
func (c *ClusterView) KeepsScores() bool { return c.scores != nil }

// Score records candidate i's score for the decision being made (kept for
// decision traces; a policy that scores should score every candidate).
func (c *ClusterView) Score(i int, s float64) {
	if c.scores == nil {
		return
	}
	c.scores[i] = s
	c.scored = true
}

// Filter records that candidate i was filtered out of the decision being
// made (it cannot be the target), with the reason: kept only when a caller
// asks for scores (decision traces), otherwise free.
func (c *ClusterView) Filter(i int, reason string) {
	if c.scores == nil {
		return
	}
	c.filtered = append(c.filtered, Filtered{Index: i, Reason: reason})
}

// Filtered returns the candidates filtered out in the last decision (nil
// when none, or when nothing is kept).
func (c *ClusterView) Filtered() []Filtered { return c.filtered }

// Board is the router's knowledge of one candidate group: the cluster
// writes it, policies read it through a ClusterView.
type Board struct {
	reps     []ReplicaView
	view     ClusterView
	scoreBuf []float64
	// tree is a min-tree over (load << 32 | index) of the replicas, kept on
	// large boards so that the least loaded is found in O(1) and kept up
	// to date in O(log n) per change; nil on small boards (a scan is
	// cheaper there).
	tree []uint64
	// volAt is, per replica, when its reported status starts changing
	// without being reported (KV use, as a replica runs a span of steps:
	// docs/engine.md, "Leaping"; math.MaxInt64: never); reading one from
	// then calls onRead first, which reports it. Loads (waiting, running,
	// in flight) never change unreported, so the load tree stays exact.
	volAt  []int64
	onRead func(i int)
	// kvx orders the replicas for the weighted router (kvindex.go); nil
	// until it first routes on a board with a load tree.
	kvx *kvIndex
	// held and gated count the group's requests waiting at the router:
	// held by the routing policy, and queued by flow control.
	held, gated int
}

// TreeMinReplicas is the board size above which the load tree is kept.
const TreeMinReplicas = 16

// NewBoard returns a board for replicas with the given identities; tree
// forces (1) or forbids (-1) the load tree, 0 decides by size.
func NewBoard(ids, deployments, roles []string, tree int) *Board {
	b := &Board{reps: make([]ReplicaView, len(ids))}
	for i := range ids {
		b.reps[i] = ReplicaView{id: ids[i], deployment: deployments[i], role: roles[i], state: "serving"}
	}
	b.view.b = b
	if tree > 0 || tree == 0 && len(ids) > TreeMinReplicas {
		n := 1
		for n < len(ids) {
			n <<= 1
		}
		b.tree = make([]uint64, 2*n)
		for i := range b.tree {
			b.tree[i] = ^uint64(0)
		}
		for i := range ids {
			b.fix(i)
		}
	}
	return b
}

// fix updates replica i's leaf in the load tree and its ancestors.
func (b *Board) fix(i int) {
	if b.tree == nil {
		return
	}
	l := uint64(min(b.reps[i].Load(), 1<<31))
	k := len(b.tree)/2 + i
	b.tree[k] = l<<32 | uint64(i)
	for k > 1 {
		k >>= 1
		b.tree[k] = min(b.tree[2*k], b.tree[2*k+1])
	}
}

// Len is the number of replicas on the board.
func (b *Board) Len() int { return len(b.reps) }

// Status is replica i's status as last reported.
func (b *Board) Status(i int) ReplicaStatus { return b.reps[i].s }

// Set reports replica i's status.
func (b *Board) Set(i int, s ReplicaStatus) {
	prev := b.reps[i].s
	b.reps[i].s = s
	if b.tree != nil && s.Waiting+s.Running+s.InFlight != prev.Waiting+prev.Running+prev.InFlight {
		b.fix(i)
	}
	if b.kvx != nil {
		b.kvx.set(i, &prev, &s)
	}
}

// OnRead installs the callback that reports a volatile replica's status
// when a policy reads it (SetVolatile).
func (b *Board) OnRead(f func(i int)) { b.onRead = f }

// SetVolatile says from when replica i's status changes unreported
// (math.MaxInt64: it is reported again).
func (b *Board) SetVolatile(i int, from int64) {
	if b.volAt == nil {
		if from == math.MaxInt64 {
			return
		}
		b.volAt = make([]int64, len(b.reps))
		for j := range b.volAt {
			b.volAt[j] = math.MaxInt64
		}
	}
	b.volAt[i] = from
}

// Refresh reports, at now, the status of every replica whose status has
// changed unreported (SetVolatile), for a reader of the whole board.
func (b *Board) Refresh(now int64) {
	v := ClusterView{b: b, now: now}
	v.current()
}

// SetTiers reports replica i's lower KV tiers (copied).
func (b *Board) SetTiers(i int, ts []TierStatus) {
	r := &b.reps[i]
	if len(r.tiers) != len(ts) {
		r.tiers = make([]TierStatus, len(ts))
	}
	copy(r.tiers, ts)
}

// SetLoRAs reports replica i's resident LoRA adapters (copied) and its
// free slots.
func (b *Board) SetLoRAs(i int, names []string, free int) {
	r := &b.reps[i]
	r.loras = append(r.loras[:0], names...)
	r.loraFree = free
}

// SetState reports replica i's lifecycle state.
func (b *Board) SetState(i int, state string) { b.reps[i].state = state }

// AddInFlight counts a request just routed to replica i.
func (b *Board) AddInFlight(i int) {
	prev := b.reps[i].s
	b.reps[i].s.InFlight++
	b.fix(i)
	if b.kvx != nil {
		b.kvx.set(i, &prev, &b.reps[i].s)
	}
}

// View returns the board's view for a decision at now. With keepScores,
// policies' Score calls are kept (see Scores) — decision traces ask for it;
// otherwise they cost nothing.
func (b *Board) View(now int64, prefix PrefixOracle, keepScores bool) *ClusterView {
	v := &b.view
	v.now, v.prefix, v.scored = now, prefix, false
	v.scores = nil
	v.filtered = v.filtered[:0]
	if keepScores {
		if len(b.scoreBuf) < len(b.reps) {
			b.scoreBuf = make([]float64, len(b.reps))
		}
		v.scores = b.scoreBuf[:len(b.reps)]
		clear(v.scores)
	}
	return v
}

// SetWaiting reports the group's requests waiting at the router: held by
// the routing policy (a Wait decision) and queued at the gateway.
func (b *Board) SetWaiting(held, gated int) { b.held, b.gated = held, gated }

// Held is the number of the candidates' requests held at the router by the
// routing policy (Wait decisions), waiting to be routed again.
func (c *ClusterView) Held() int { return c.b.held }

// GatewayQueued is the number of the candidates' requests queued at the
// gateway by flow control (router.flow_control), held ones not counted.
func (c *ClusterView) GatewayQueued() int { return c.b.gated }

// Scores returns the scores recorded in the last decision, or nil.
func (c *ClusterView) Scores() []float64 {
	if !c.scored {
		return nil
	}
	return c.scores
}

// Clone copies the board.
func (b *Board) Clone() *Board {
	d := &Board{reps: append([]ReplicaView(nil), b.reps...), held: b.held, gated: b.gated}
	for i := range d.reps {
		if t := d.reps[i].tiers; t != nil {
			d.reps[i].tiers = append([]TierStatus(nil), t...)
		}
		if l := d.reps[i].loras; l != nil {
			d.reps[i].loras = append([]string(nil), l...)
		}
	}
	if b.tree != nil {
		d.tree = append([]uint64(nil), b.tree...)
	}
	if b.volAt != nil {
		d.volAt = append([]int64(nil), b.volAt...) // the copy's OnRead is its owner's to install
	}
	d.view.b = d
	return d
}
