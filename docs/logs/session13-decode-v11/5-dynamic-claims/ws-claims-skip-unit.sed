# The warp-specialized kernel's claimer publishes each claimed unit one too
# far, so that the first claimed unit is never run: the paged tests on the
# kernel forced on three blocks (each claiming) must fail on it.
s/const int c = 2 \* gridDim.x + claimed;/const int c = 2 * gridDim.x + claimed + 1;/
