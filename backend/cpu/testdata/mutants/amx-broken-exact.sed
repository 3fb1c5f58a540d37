# file: backend/cpu/amx_amd64.s
# test: go test -count=1 -run 'TestAMX|TestConformance' ./backend/cpu
# needs: amx
# The exact form's P·V without the weights' m part (STEPS64_PV3 keeps the
# h part alone): the AMX tests of the exact FP8 form must fail.
s/^#define STEPS64_PV3 STEP64(2, 0, 0); STEP64(2, 0, 1); STEP64(1, 0, 0); STEP64(1, 0, 1); STEPS64_HH$/#define STEPS64_PV3 STEP64(2, 0, 0); STEP64(2, 0, 1); STEPS64_HH/
