package roofline

import (
	"fmt"
	"strings"
)

// Dtype is a numeric storage format for weights or KV cache.
type Dtype string

// Known dtypes. FP4 and INT4 store two values per byte.
const (
	BF16 Dtype = "bf16"
	FP16 Dtype = "fp16"
	FP32 Dtype = "fp32"
	FP8  Dtype = "fp8"
	INT8 Dtype = "int8"
	FP4  Dtype = "fp4"
	INT4 Dtype = "int4"
)

// Bytes is the storage size of one value.
func (d Dtype) Bytes() float64 {
	switch d {
	case FP32:
		return 4
	case BF16, FP16:
		return 2
	case FP8, INT8:
		return 1
	case FP4, INT4:
		return 0.5
	}
	return 0
}

// ParseDtype accepts the names users and HF configs use.
func ParseDtype(s string) (Dtype, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "bf16", "bfloat16":
		return BF16, nil
	case "fp16", "float16", "half":
		return FP16, nil
	case "fp32", "float32", "float":
		return FP32, nil
	case "fp8", "fp8_e4m3", "fp8_e5m2", "e4m3", "float8", "float8_e4m3fn":
		return FP8, nil
	case "int8":
		return INT8, nil
	case "fp4", "nvfp4", "mxfp4":
		return FP4, nil
	case "int4", "w4a16", "awq", "gptq":
		return INT4, nil
	}
	return "", fmt.Errorf("unknown dtype %q (expected bf16, fp16, fp32, fp8, int8, fp4 or int4)", s)
}
