// The elementwise kernel's operation codes: one definition, read by eltwise.comp (GLSL) and by
// the host code that records it (kernels/vulkan/ops_elementwise.cpp); plain #defines are valid in
// both languages.
#ifndef VRUN_ELTWISE_OPS_H
#define VRUN_ELTWISE_OPS_H

#define OP_NEG 0
#define OP_ABS 1
#define OP_EXP 2
#define OP_LOG 3
#define OP_SQRT 4
#define OP_RSQRT 5
#define OP_RECIP 6
#define OP_SQUARE 7
#define OP_SIN 8
#define OP_COS 9
#define OP_TANH 10
#define OP_ERF 11
#define OP_SIGMOID 12
#define OP_RELU 13
#define OP_SILU 14
#define OP_SOFTPLUS 15
#define OP_GELU 16
#define OP_GELU_TANH 17
#define OP_CLAMP 18
#define OP_SCALE 19
#define OP_POW_SCALAR 20
#define OP_COPY 21
#define OP_ADD 30
#define OP_SUB 31
#define OP_MUL 32
#define OP_DIV 33
#define OP_MAX 34
#define OP_MIN 35
#define OP_POW 36
#define OP_EQ 37
#define OP_LT 38
#define OP_GT 39
#define OP_GLU 40
#define OP_WHERE 41
#define OP_GLU_SILU 42

#endif
