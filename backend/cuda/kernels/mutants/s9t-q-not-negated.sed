# module: attention_sm90a.cu
# tests: TestNewResidentMatchesUpload
# The tensor form's producer without the negative score factor's sign:
# Q's codes are never negated, so a negative scale acts as a positive one.
# The negative-scale cases of TestNewResidentMatchesUpload must fail.
s|    const bool neg = tp->f.scale \* (double)p.q_scale\[b \* p.hq + h\] \* (double)p.k_scale\[b \* p.hkv + kvh\] < 0.0;|    const bool neg = false;|
