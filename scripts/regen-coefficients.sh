#!/bin/sh
# Regenerates every committed file in coefficients/<model>/ from the real
# measurements in ../shared/data/measurements. Deterministic: fixed seeds,
# Nelder–Mead has no randomness, and simulations are combined in a fixed
# order, so re-running gives byte-identical files (--force: these are the
# shipped files, replaced on purpose). Fit reports go to
# $REPORTS (default: out/coefficients-reports, kept: the last line names
# it), one per file.
set -eu
cd "$(dirname "$0")/.."
M=../shared/data/measurements
S=$M/aiconfigurator/silicon_sample.csv
L=$M/llmservingsim
if [ ! -d "$M" ]; then
	echo "make coefficients: $M not found: it refits every coefficients/ file from the public measurements kept beside the repository (../shared/data, listed in its README)" >&2
	exit 2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
REPORTS=${REPORTS:-out/coefficients-reports}
mkdir -p "$REPORTS"
go build -o "$tmp/blis-calibrate" ./cmd/blis-calibrate

n=0
cal() {
	name=$1
	shift
	n=$((n + 1))
	echo "[$n] $name" >&2
	"$tmp/blis-calibrate" -q --relative-to . --seed 42 --force -o coefficients/ --report "$REPORTS/$name.txt" "$@"
}

# Closed-loop serving points, H100 vLLM, fitted on 80% and tested on the
# other 20%: the three models of silicon_sample.csv with the most H100 vLLM
# rows that the model catalogue knows (MiniMax-M2.5 has no config.json here).
for tp in 2 4 8; do
	cal qwen3-32b-h100-tp$tp --serving-points $S --model Qwen/Qwen3-32B --gpu h100 --tp $tp \
		--engine vllm --engine-version 0.12.0 --precision native --holdout 0.2 --features tokens --max-evals 600
	cal llama-3.1-70b-fp8-h100-tp$tp --serving-points $S --model meta-llama/Llama-3.1-70B --gpu h100 --tp $tp \
		--engine vllm --precision fp8 --holdout 0.2 --features tokens --max-evals 600
	cal gpt-oss-120b-fp4-h100-tp$tp --serving-points $S --model openai/gpt-oss-120b --gpu h100 --tp $tp \
		--engine vllm --engine-version 0.18.0 --precision fp4 --holdout 0.2 --features tokens --max-evals 600
done

# gpt-oss-120b on the other GPUs with as many vLLM points per TP as the H100
# groups above (14–18 distinct points each): H200 under vLLM 0.18.0 and B200
# under vLLM 0.15.1. (H200 TP1 has 7, B200 TP8 5: too few to hold any out.)
for tp in 2 4 8; do
	cal gpt-oss-120b-fp4-h200-tp$tp --serving-points $S --model openai/gpt-oss-120b --gpu h200 --tp $tp \
		--engine vllm --engine-version 0.18.0 --precision fp4 --holdout 0.2 --features tokens --max-evals 600
done
for tp in 1 2 4; do
	cal gpt-oss-120b-fp4-b200-tp$tp --serving-points $S --model openai/gpt-oss-120b --gpu b200 --tp $tp \
		--engine vllm --engine-version 0.15.1 --precision fp4 --holdout 0.2 --features tokens --max-evals 600
done

# Replayed real vLLM 0.19 runs (llmservingsim): fit on one run, test on the
# other. Roofline features carry across models and GPUs; token features
# would not.
cal llama-3.1-8b-rtx4090 --requests $L/RTX4090/Llama-3.1-8B/vllm/requests.jsonl \
	--engine-config $L/RTX4090/Llama-3.1-8B/vllm/meta.json \
	--test $L/RTXPRO6000/Qwen3-32B/vllm/requests.jsonl --test-engine-config $L/RTXPRO6000/Qwen3-32B/vllm/meta.json \
	--test-gpu rtxpro6000 --features roofline
cal qwen3-32b-rtxpro6000 --requests $L/RTXPRO6000/Qwen3-32B/vllm/requests.jsonl \
	--engine-config $L/RTXPRO6000/Qwen3-32B/vllm/meta.json --gpu rtxpro6000 \
	--test $L/RTX4090/Llama-3.1-8B/vllm/requests.jsonl --test-engine-config $L/RTX4090/Llama-3.1-8B/vllm/meta.json \
	--features roofline

# Step-level: Splitwise's Llama2-70B prefill and decode-iteration times,
# exact NNLS with 5-fold cross-validation.
for gpu in h100-80gb a100-80gb; do
	for tp in 2 4 8; do
		cal llama-2-70b-$gpu-tp$tp --step-times $M/splitwise/perf_model.csv --model llama2-70b --gpu $gpu --tp $tp \
			--engine splitwise --engine-version 8f99e7dc --kfold 5 --features tokens
	done
done
echo "regenerated $n files; reports in $REPORTS" >&2
