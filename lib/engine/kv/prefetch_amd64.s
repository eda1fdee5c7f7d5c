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

// func prefetchQueued(b *block, q []qent)
// For each entry e of q naming a block (e.id >= 0): PREFETCHT0 b[e.id].
TEXT ·prefetchQueued(SB), NOSPLIT, $0-32
	MOVQ b+0(FP), AX
	MOVQ q_base+8(FP), BX
	MOVQ q_len+16(FP), CX
	TESTQ CX, CX
	JEQ qdone
qloop:
	MOVLQSX (BX), DX
	TESTQ DX, DX
	JS qnext
	SHLQ $4, DX
	PREFETCHT0 (AX)(DX*1)
qnext:
	ADDQ $8, BX
	DECQ CX
	JNE qloop
qdone:
	RET
