# module: attention_sm90a.cu
# tests: TestConformance
# The Hopper kernel exports a schedule that is not internal/tiles' (P·V in
# one more column part): the module must fail its load-time check.
s/HopperTiles<HD>::PV_PARTS, HopperTiles<HD>::FUSED_PINGPONG};/HopperTiles<HD>::PV_PARTS + 1, HopperTiles<HD>::FUSED_PINGPONG};/
