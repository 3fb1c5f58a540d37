# module: attention_sm90a.cu
# tests: TestPackedVarlen
# A decode item's even rows take their warp's own maximum, not the
# warpgroup's: the warps' weights then stand at other scales in one P·V,
# and the decode tokens' rows must fail on it.
s/      mx\[0\] = fmaxf(mx\[0\], v.x);/      mx[0] = mx[0];/
