package load

import (
	"strings"
	"testing"
)

var vllmChunk = []byte(`{"id":"cmpl-3f1c0a8c6b5e4b1e9c2a","object":"text_completion","created":1732280000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"text":" the","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}`)

func TestDecodeChunk(t *testing.T) {
	for _, tc := range []struct {
		in                  string
		tokens, fin, usage  bool
		errMsg, decodeError string
	}{
		{string(vllmChunk), true, false, false, "", ""},
		{`{"choices":[{"index":0,"text":"","finish_reason":"length"}]}`, false, true, false, "", ""},
		{`{"choices":[{"delta":{"role":"assistant","content":""}}]}`, false, false, false, "", ""},
		{`{"choices":[{"delta":{"content":"hi"}}]}`, true, false, false, "", ""},
		{`{"choices":[{"delta":{"reasoning_content":"hmm"}}]}`, true, false, false, "", ""},
		{`{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":2}}}`, false, false, true, "", ""},
		{`{"error":{"message":"out of memory","code":500}}`, false, false, false, "out of memory", ""},
		{`{"object":"error","message":"bad things"}`, false, false, false, "bad things", ""},
		{`{"choices": 5}`, false, false, false, "", "not a JSON completion chunk"},
		{`not json`, false, false, false, "", "not a JSON completion chunk"},
	} {
		d, err := decodeChunk([]byte(tc.in))
		if tc.decodeError != "" {
			if err == nil || !strings.Contains(err.Error(), tc.decodeError) {
				t.Errorf("%s: error %v, want %q", tc.in, err, tc.decodeError)
			}
			continue
		}
		if err != nil || d.tokens != tc.tokens || d.finished != tc.fin || (d.usage != nil) != tc.usage || d.errMsg != tc.errMsg {
			t.Errorf("%s: %+v, %v", tc.in, d, err)
		}
	}
}

func BenchmarkDecodeChunk(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := decodeChunk(vllmChunk); err != nil {
			b.Fatal(err)
		}
	}
}
