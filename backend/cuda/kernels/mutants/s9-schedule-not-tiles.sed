# module: attention_sm90a.cu
# tests: TestConformance
# The Hopper kernel exports a schedule that is not internal/tiles' (P·V in
# one more column part): the module must fail its load-time check.
s/HopperTiles<HD>::ONE_PA,   HopperTiles<HD>::PV_PARTS};/HopperTiles<HD>::ONE_PA,   HopperTiles<HD>::PV_PARTS + 1};/
