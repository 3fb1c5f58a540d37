#!/usr/bin/env bash
# Each mutant below, one sed edit of a NEON assembly file, must fail the
# tests named beside it when they run for arm64 under qemu: the proof that
# those tests hold the NEON routines (fp8/quant_arm64.s,
# backend/cpu/kernels_arm64.s). The edit is applied through go test's
# -overlay, so the tree is never changed. Needs qemu-aarch64-static.
# Exit status 1 if a mutant survives or an edit no longer applies.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bad=0

# mutant FILE SED TESTS WHAT
mutant() {
	local file=$1 expr=$2 run=$3 what=$4
	sed "$expr" "$file" >"$tmp/m.s"
	if cmp -s "$file" "$tmp/m.s"; then
		echo "stale    $what (the edit no longer applies)"
		bad=1
		return
	fi
	printf '{"Replace":{"%s":"%s"}}\n' "$PWD/$file" "$tmp/m.s" >"$tmp/overlay.json"
	if GOARCH=arm64 go test -overlay "$tmp/overlay.json" -exec qemu-aarch64-static -short -count=1 \
		-run "$run" "./$(dirname "$file")" >"$tmp/log" 2>&1 || ! grep -q -- '--- FAIL' "$tmp/log"; then
		echo "SURVIVED $what"
		bad=1
	else
		echo "killed   $what: $(grep -m1 -E 'want|exceeds' "$tmp/log" | sed 's/^[[:space:]]*//')"
	fi
}

q=fp8/quant_arm64.s
mutant $q 's/^\tFMAX4S(25, r, r); \\$/\tVORR R.B16, R.B16, R.B16; \\/' NEONConversions \
	"magic sum without its 1.5·2^14 floor (subnormal quanta)"
mutant $q 's/^\tVAND V29.B16, X.B16, X.B16; \\$/\tVORR X.B16, X.B16, X.B16; \\/' NEONConversions \
	"NaN keeps its sign in every mode"
mutant $q 's/^\tCMHI4S(23, a, s); \\$/\tCMHI4S(27, a, s); \\/' NEONConversions \
	"overflow taken at +Inf instead of above 464"
mutant $q 's/^\tSIGN(V2, V6)$/\tVORR V6.B16, V6.B16, V6.B16/' NEONConversions \
	"round's fast path loses a zero's sign"
mutant $q 's/^\tCBNZW R3, round_selects$/\tCBZW R3, round_selects/' NEONConversions \
	"round's fast path taken where a lane overflows or is NaN"
mutant $q 's/^\tCMHI4S(x, 27, t); \\$/\tCMHI4S(28, 28, t); \\/' NEONAmax \
	"amax drops every lane"
mutant $q 's/^\tVTBX V3.B16, \[V20/\tVTBX V1.B16, [V20/' NEONDecode \
	"decode's upper table indexed by m, not m ^ 64"
mutant $q 's|^\tVORR V2.B16, V4.B16, V4.B16  // bits 24-31, signed|\tVORR V4.B16, V4.B16, V4.B16|' NEONDecode \
	"decode loses the sign"
mutant $q 's/^\tVZIP1 V4.B16, V5.B16, V6.B16/\tVZIP1 V5.B16, V4.B16, V6.B16/' NEONDecode \
	"decode's bytes interleaved the wrong way round"

k=backend/cpu/kernels_arm64.s
mutant $k '0,/^\tFMA16E(3)$/s//\tFMA16E(2)/' TestKernels \
	"scores use lane 2 of q twice"
mutant $k '/^pv4_o16:/,/BNE/{s/^\tFMA16$/\tVORR V0.B16, V0.B16, V0.B16/}' TestKernels \
	"pv4 drops the keys after the last four"
mutant $k '/^pv1_c4:/,/^pv1_q4:/{s/^\tFMUL4S_E(30, 0, 0, 0)$/\tVORR V0.B16, V0.B16, V0.B16/}' TestKernels \
	"pv1 skips the rescale of its last columns"
mutant $k 's/^\tFMAX4S(7, 3, 3)$/\tVORR V3.B16, V3.B16, V3.B16/' TestKernels \
	"rowMax skips every fourth vector"
mutant $k 's/^\tVBIT V1.B16, V19.B16, V4.B16$/\tVORR V4.B16, V4.B16, V4.B16/' 'TestKernels|TestExpSumError' \
	"expSum does not flush below the normal range"
mutant $k 's/^\tFRINTA4S(k, k); \\$/\tVORR K.B16, K.B16, K.B16; \\/' TestExpSumError \
	"expSum's k not rounded"
mutant $k 's|^\tVTRN2 V6.D2, V4.D2, V18.D2 // dim 2$|\tVTRN1 V6.D2, V4.D2, V18.D2|' TestKernels \
	"transpose writes dim 0 for dim 2"
mutant $k 's/^\tFMULS F31, F0, F0$/\tFMOVS F0, F0/' TestScaleRows \
	"scaleRows leaves its last d mod 4 columns unscaled"
exit $bad
