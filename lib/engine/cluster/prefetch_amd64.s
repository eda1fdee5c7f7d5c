#include "textflag.h"

// func prefetch(p unsafe.Pointer)
TEXT ·prefetch(SB), NOSPLIT, $0-8
	MOVQ p+0(FP), AX
	PREFETCHT0 (AX)
	RET

// func prefetchRanges(r []prange)
// For each range {p, n} of r, n > 0: PREFETCHT0 every cache line of
// [p, p+n).
TEXT ·prefetchRanges(SB), NOSPLIT, $0-24
	MOVQ r_base+0(FP), BX
	MOVQ r_len+8(FP), DX
	TESTQ DX, DX
	JEQ done
next:
	MOVQ 0(BX), AX
	MOVQ 8(BX), CX
	LEAQ -1(AX)(CX*1), CX
	ANDQ $~63, AX
	ANDQ $~63, CX
line:
	PREFETCHT0 (AX)
	ADDQ $64, AX
	CMPQ AX, CX
	JLS line
	ADDQ $16, BX
	DECQ DX
	JNE next
done:
	RET
