package autoscale

// Action is one scale action of a pool, for the oscillation detector.
type Action struct {
	TimeUS int64
	Up     bool
}

// Oscillation is a scale_oscillation: an up, a down and an up again (or
// down, up, down) of one pool within WindowUS.
type Oscillation struct {
	StartUS, EndUS int64
	FirstUp        bool // the pattern is up/down/up (else down/up/down)
}

// DefaultOscillationWindowUS is the window blis-report uses: 10 minutes,
// twice Kubernetes' default scale-down stabilisation.
const DefaultOscillationWindowUS = 600e6

// Oscillations finds the reversals of direction of one pool's actions
// (in time order): each triple of consecutive direction changes
// up→down→up or down→up→down whose first and last actions are at most
// windowUS apart is reported once, and scanning resumes after it.
// Consecutive actions in the same direction are one move.
func Oscillations(actions []Action, windowUS int64) []Oscillation {
	// Collapse runs of the same direction to their first action... but
	// keep the last of a run as the turning point for the window.
	type move struct {
		first, last int64
		up          bool
	}
	var ms []move
	for _, a := range actions {
		if n := len(ms); n > 0 && ms[n-1].up == a.Up {
			ms[n-1].last = a.TimeUS
			continue
		}
		ms = append(ms, move{a.TimeUS, a.TimeUS, a.Up})
	}
	var out []Oscillation
	for i := 0; i+2 < len(ms); {
		// The pattern starts when the first move ends and finishes when
		// the third begins.
		if ms[i+2].first-ms[i].last <= windowUS {
			out = append(out, Oscillation{StartUS: ms[i].last, EndUS: ms[i+2].first, FirstUp: ms[i].up})
			i += 2
			continue
		}
		i++
	}
	return out
}
