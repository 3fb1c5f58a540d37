# file: sdpa/outliers.go
# test: GOARCH=arm64 go test -count=1 -exec qemu-aarch64-static -run TestSplitRowExact ./sdpa
# needs: qemu-arm64
# splitRow without the conversion that rounds hi: arm64's compiler fuses
# the product into lo := x - hi, and hi + lo no longer equals x.
s/hi := float32(fp8.ToE4M3(x\/scale, fp8.NoSat).Float32() \* scale)/hi := fp8.ToE4M3(x\/scale, fp8.NoSat).Float32() * scale/
