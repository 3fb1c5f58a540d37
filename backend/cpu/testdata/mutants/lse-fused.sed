# file: sdpa/transform.go
# test: GOARCH=arm64 go test -count=1 -exec qemu-aarch64-static -run TestLSEShiftRounding ./sdpa
# needs: qemu-arm64
# lseShift without the conversions that round each product: arm64's
# compiler fuses the products into the sums, and the LSE no longer equals
# the device's separately rounded correction bit for bit.
s/dot += float64(float64(x) \* m\[c\])/dot += float64(x) * m[c]/
s/return float64(float64(scale) \* dot)/return float64(scale) * dot/
