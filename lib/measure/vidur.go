package measure

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// LayerSample is one row of Vidur's per-operation MLP-layer profile: the
// median time of one dense layer's non-attention work for Tokens tokens on
// one of TP ranks.
type LayerSample struct {
	Source string // file:line
	Tokens int
	TP     int
	US     float64 // Σ of the operations' medians
}

// VidurLayerOps are the operations of a dense layer outside attention that
// Vidur profiles (embedding and LM head excluded): norms, projections,
// rotary, activation, residual add.
var VidurLayerOps = []string{"input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj",
	"post_attention_layernorm", "mlp_up_proj", "mlp_act", "mlp_down_proj", "add"}

// ReadVidurMLP reads Vidur's profiling/compute/<gpu>/<model>/mlp.csv (times
// in ms, columns time_stats.<op>.median, num_tokens,
// num_tensor_parallel_workers). A row without every operation's median is
// skipped and counted.
func ReadVidurMLP(path string, r io.Reader) (rows []LayerSample, skipped int, err error) {
	cols := []string{"num_tokens", "num_tensor_parallel_workers"}
	for _, op := range VidurLayerOps {
		cols = append(cols, "time_stats."+op+".median")
	}
	t, err := newCSVTable(path, r, cols...)
	if err != nil {
		return nil, 0, err
	}
	for {
		if err := t.next(); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, 0, err
		}
		var s LayerSample
		if s.Tokens, err = t.count("num_tokens", true); err != nil {
			return nil, 0, err
		}
		if s.TP, err = t.count("num_tensor_parallel_workers", true); err != nil {
			return nil, 0, err
		}
		ok := true
		for _, op := range VidurLayerOps {
			name := "time_stats." + op + ".median"
			if t.str(name) == "" {
				ok = false
				break
			}
			ms, err := t.float(name, false)
			if err != nil {
				return nil, 0, err
			}
			s.US += ms * 1000
		}
		if !ok || !(s.US > 0) || math.IsInf(s.US, 0) {
			skipped++
			continue
		}
		s.Source = fmt.Sprintf("%s:%d", t.path, t.line)
		rows = append(rows, s)
	}
	return rows, skipped, nil
}

// ReadVidurMLPFile is ReadVidurMLP on a file.
func ReadVidurMLPFile(path string) ([]LayerSample, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, &InputError{Path: path, Msg: err.Error()}
	}
	defer f.Close()
	return ReadVidurMLP(path, f)
}
