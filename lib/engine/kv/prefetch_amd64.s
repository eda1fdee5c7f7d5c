#include "textflag.h"

// func prefetchHomes(slots *uint32, n uint64, keys []uint64)
// For each key k: PREFETCHT0 slots[(k>>32)*n>>32], as blockIndex.home.
TEXT ·prefetchHomes(SB), NOSPLIT, $0-40
	MOVQ slots+0(FP), AX
	MOVQ n+8(FP), SI
	MOVQ keys_base+16(FP), BX
	MOVQ keys_len+24(FP), CX
	TESTQ CX, CX
	JEQ done
loop:
	MOVQ (BX), DX
	SHRQ $32, DX
	IMULQ SI, DX
	SHRQ $32, DX
	PREFETCHT0 (AX)(DX*4)
	ADDQ $8, BX
	DECQ CX
	JNE loop
done:
	RET
