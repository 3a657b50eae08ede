# Source this config for FP8 training
export FP8=True
export FP8_HYBRID=True
export FP8_AMAX_HISTORY=1024
export FP8_AMAX_ALGO="max"
export FP8_REDUCE_AMAX=True
