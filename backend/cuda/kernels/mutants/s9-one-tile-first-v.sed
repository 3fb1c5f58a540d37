# module: attention_sm90a.cu
# tests: TestFP8PAccuracy
# The one-tile form's P·V reads the first V tile for all 256 keys.
s/^  const uint32_t v2_addr = v_addr + G::VT;$/  const uint32_t v2_addr = v_addr;/
