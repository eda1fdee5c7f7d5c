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

func BenchmarkDecodeChunkJSON(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := decodeChunkJSON(vllmChunk); err != nil {
			b.Fatal(err)
		}
	}
}

// The fast path agrees with encoding/json whenever it answers, and takes
// the common chunks of vLLM, SGLang and OpenAI.
func TestScanChunkTakesCommonChunks(t *testing.T) {
	for _, in := range []string{
		string(vllmChunk),
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" world"},"logprobs":null,"finish_reason":null}],"usage":null}`,
		`{"id":"x","choices":[{"index":0,"text":"","logprobs":{"tokens":["a"],"token_logprobs":[-0.5e-3],"top_logprobs":null},"finish_reason":"length","stop_reason":null}]}`,
		`{"id":"x","choices":[{"index":0,"delta":{"reasoning_content":"\u00e9t\u00e9"},"finish_reason":null}]}`,
	} {
		d, ok := scanChunk([]byte(in))
		ref, err := decodeChunkJSON([]byte(in))
		if !ok || err != nil || d != ref {
			t.Errorf("%s: fast %+v %v, json %+v %v", in, d, ok, ref, err)
		}
	}
}

// FuzzScanChunk: where the fast path answers, encoding/json gives the same
// answer; decodeChunk never panics.
func FuzzScanChunk(f *testing.F) {
	f.Add(vllmChunk)
	for _, s := range []string{
		`{"choices":[{"delta":{"content":"a"},"finish_reason":"stop"}],"usage":null}`,
		`{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7}}`,
		`{"error":{"message":"x"}}`, `{"object":"error","message":"m"}`, `{"CHOICES":[{"TEXT":"a"}]}`,
		`{"choices":[{"text":"a"}],"choices":[]}`, `{"a":[1,2.5e-3,-0,true,false,null,{"b":"\u00e9"}]}`, `null`, `{} x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		ref, refErr := decodeChunkJSON(in)
		d, ok := scanChunk(in)
		if ok && (refErr != nil || d != ref) {
			t.Fatalf("%q: fast %+v, encoding/json %+v (%v)", in, d, ref, refErr)
		}
		decodeChunk(in)
	})
}
