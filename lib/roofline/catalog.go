package roofline

import (
	"embed"
	"fmt"
	"os"
	"sort"
	"strings"
)

//go:embed models/*/config.json
var modelFS embed.FS

// CatalogModel is one embedded config.json: its HuggingFace repo id, the
// directory under models/, and the short aliases users type.
type CatalogModel struct {
	ID      string
	Dir     string
	Aliases []string
}

// Models lists the embedded configs. Alias[0] is the canonical short name,
// used as the directory name under coefficients/.
var Models = []CatalogModel{
	{"meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b-instruct", []string{"llama-3.1-8b", "llama-3.1-8b-instruct", "meta-llama/Llama-3.1-8B", "meta-llama/Meta-Llama-3.1-8B-Instruct"}},
	{"meta-llama/Llama-3.1-70B-Instruct", "llama-3.1-70b-instruct", []string{"llama-3.1-70b", "llama-3.1-70b-instruct", "meta-llama/Llama-3.1-70B", "meta-llama/Meta-Llama-3.1-70B-Instruct"}},
	{"meta-llama/Llama-2-7b-hf", "llama-2-7b-hf", []string{"llama-2-7b", "llama2-7b"}},
	{"meta-llama/Llama-2-70b-hf", "llama-2-70b-hf", []string{"llama-2-70b", "llama2-70b"}},
	{"codellama/CodeLlama-34b-Instruct-hf", "codellama-34b-instruct-hf", []string{"codellama-34b", "codellama/codellama-34b-instruct-hf"}},
	{"Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b-instruct", []string{"qwen2.5-7b"}},
	{"Qwen/Qwen3-14B", "qwen3-14b", []string{"qwen3-14b"}},
	{"Qwen/Qwen3-32B", "qwen3-32b", []string{"qwen3-32b"}},
	{"Qwen/Qwen3-1.7B", "qwen3-1.7b", []string{"qwen3-1.7b"}},
	{"Qwen/Qwen3-30B-A3B", "qwen3-30b-a3b", []string{"qwen3-30b-a3b"}},
	{"mistralai/Mixtral-8x7B-v0.1", "mixtral-8x7b-v0.1", []string{"mixtral-8x7b"}},
	{"mistralai/Mistral-Nemo-Instruct-2407", "mistral-nemo-instruct-2407", []string{"mistral-nemo", "mistral-nemo-12b"}},
	{"deepseek-ai/DeepSeek-V2-Lite", "deepseek-v2-lite", []string{"deepseek-v2-lite"}},
	{"RedHatAI/Llama-4-Scout-17B-16E-Instruct-FP8-dynamic", "llama-4-scout-17b-16e-instruct-fp8-dynamic", []string{"llama-4-scout-fp8", "llama-4-scout"}},
	{"01-ai/Yi-34B", "yi-34b", []string{"yi-34b"}},
	{"openai/gpt-oss-120b", "gpt-oss-120b", []string{"gpt-oss-120b"}},
	{"zai-org/GLM-5.2-FP8", "glm-5.2-fp8", []string{"glm-5.2-fp8"}},
}

// ShortName is the canonical short alias of a catalogue model.
func (m CatalogModel) ShortName() string { return m.Aliases[0] }

// LookupModel finds a catalogue entry by HF id or alias (case-insensitive).
func LookupModel(name string) (CatalogModel, bool) {
	n := strings.ToLower(strings.TrimSpace(name))
	for _, m := range Models {
		if strings.ToLower(m.ID) == n || m.Dir == n {
			return m, true
		}
		for _, a := range m.Aliases {
			if strings.ToLower(a) == n {
				return m, true
			}
		}
	}
	return CatalogModel{}, false
}

// ModelKey is the directory name under coefficients/ for a model given by
// catalogue name, HF id or path: the short alias when catalogued, otherwise
// the id with "/" replaced by "--" and lower-cased.
func ModelKey(name string) string {
	if m, ok := LookupModel(name); ok {
		return m.ShortName()
	}
	return strings.ToLower(strings.ReplaceAll(strings.TrimSpace(name), "/", "--"))
}

// LoadModel returns the architecture for a catalogue id/alias, or reads the
// config.json at a path (a directory holding config.json also works).
func LoadModel(name string) (*Arch, error) {
	if m, ok := LookupModel(name); ok {
		data, err := modelFS.ReadFile("models/" + m.Dir + "/config.json")
		if err != nil {
			return nil, err
		}
		a, err := ParseConfig(m.ID, data)
		if err != nil {
			return nil, err
		}
		a.Name = m.ShortName()
		return a, nil
	}
	path := name
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = strings.TrimRight(path, "/") + "/config.json"
	}
	data, err := os.ReadFile(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("model %q: not in the catalogue (%s) and no such file", name, strings.Join(ModelNames(), ", "))
		}
		return nil, fmt.Errorf("model %q: %w", name, err)
	}
	return ParseConfig(path, data)
}

// ModelNames lists the short names, sorted.
func ModelNames() []string {
	out := make([]string, 0, len(Models))
	for _, m := range Models {
		out = append(out, m.ShortName())
	}
	sort.Strings(out)
	return out
}
